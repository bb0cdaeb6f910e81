/** `cutout serve --no-photoroom --no-clipdrop` (and their variables): their paths are not answered; the others are. */
import t from 'tap';
import { createKey, startServe } from '../helpers/api-server.js';

t.test('--no-photoroom and --no-clipdrop leave those dialects out, and only those', async (t) => {
  const srv = await startServe(t, ['--no-photoroom', '--no-clipdrop']);
  const key = await createKey(srv.dataDir);
  for (const [method, p] of [['GET', '/v1/account'], ['GET', '/v2/account'], ['POST', '/v1/segment'], ['POST', '/remove-background/v1']]) {
    const res = await fetch(`${srv.url}${p}`, { method, headers: { 'x-api-key': key.key } });
    t.equal(res.status, 404, `${method} ${p}`);
    t.equal(((await res.json()) as any).error.code, 'not_found', "v1's not-found body: no dialect answers");
  }
  const removebg = await fetch(`${srv.url}/v1.0/account`, { headers: { 'X-Api-Key': key.key } });
  t.equal(removebg.status, 200, "remove.bg's dialect stays");
  await removebg.arrayBuffer();
});

t.test('CUTOUT_PHOTOROOM=false turns Photoroom off alone', async (t) => {
  const srv = await startServe(t, [], { env: { CUTOUT_PHOTOROOM: 'false' } });
  const key = await createKey(srv.dataDir);
  const photoroom = await fetch(`${srv.url}/v1/account`, { headers: { 'x-api-key': key.key } });
  t.equal(photoroom.status, 404);
  await photoroom.arrayBuffer();
  const clipdrop = await fetch(`${srv.url}/remove-background/v1`, { method: 'POST', headers: { 'x-api-key': key.key } });
  t.equal(clipdrop.status, 400, "Clipdrop's dialect answers (no image: its 400)");
  t.same(Object.keys((await clipdrop.json()) as any), ['error']);
});
