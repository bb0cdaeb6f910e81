/** `cutout serve --no-removebg`: remove.bg's and rembg's paths are not answered; v1 is. */
import t from 'tap';
import { createKey, startApi } from './helpers/api-server.js';

t.test('--no-removebg leaves the dialects out', async (t) => {
  const srv = await startApi(t, ['--no-removebg']);
  const key = await createKey(srv.dataDir);
  const account = await fetch(`${srv.url}/v1.0/account`, { headers: { 'X-Api-Key': key.key } });
  t.equal(account.status, 404);
  t.equal(((await account.json()) as any).error.code, 'not_found', "v1's not-found body: no dialect answers");
  const rembg = await fetch(`${srv.url}/api/remove?url=http://example.com/x.jpg`, { headers: { Authorization: `Bearer ${key.key}` } });
  t.equal(rembg.status, 404);
  await rembg.arrayBuffer();
  const v1 = await fetch(`${srv.url}/api/v1/account`, { headers: { Authorization: `Bearer ${key.key}` } });
  t.equal(v1.status, 200);
  await v1.arrayBuffer();
});
