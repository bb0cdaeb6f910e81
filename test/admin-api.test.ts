/**
 * The admin API (operator.md, "The admin API"), fast lane: a real server in this process on a
 * real SQLite store, the stand-in model. Off without a token (404 everywhere under the prefix);
 * on, the token is required (401 without it or with a wrong one, 403 with a customer's key, each
 * refusal in the audit trail); keys are given, listed, changed and revoked over HTTP only, with
 * the secret shown once; credits are topped up or corrected with a reason; the trail pages.
 */
import t from 'tap';
import crypto from 'node:crypto';
import { bearer, createKey, errorCode, startApi } from './helpers/api-server.js';

const TOKEN = `adm_${crypto.randomBytes(18).toString('base64url')}`;

function admin(url: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/api/v1/admin${path}`, {
    method,
    headers: { ...bearer(TOKEN), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

t.test('without an admin token every admin route answers 404', async (t) => {
  const srv = await startApi(t);
  const key = await createKey(srv.dataDir);
  for (const [method, path] of [['GET', '/keys'], ['POST', '/keys'], ['GET', '/audit'], ['DELETE', `/keys/${key.id}`], ['POST', `/accounts/${key.account}/credits`]]) {
    const res = await fetch(`${srv.url}/api/v1/admin${path}`, { method, headers: bearer(TOKEN) });
    const err = await errorCode(res);
    t.same([err.status, err.code], [404, 'not_found'], `${method} ${path}`);
  }
  t.equal((await fetch(`${srv.url}/api/v1/account`, { headers: bearer(key.key) })).status, 200, 'the key still works: nothing was revoked');
});

t.test('a short admin token is refused at start', async (t) => {
  await t.rejects(startApi(t, ['--admin-token', 'short']), /at least 24 characters/);
});

t.test('refused admin requests: 401 without the token or with a wrong one, 403 with a customer key; all recorded', async (t) => {
  const srv = await startApi(t, ['--admin-token', TOKEN]);
  const customer = await createKey(srv.dataDir);
  const none = await fetch(`${srv.url}/api/v1/admin/keys`, { headers: { 'X-Request-Id': 'refused-1' } });
  t.equal(none.status, 401);
  t.match(none.headers.get('www-authenticate'), /Bearer/);
  t.equal((await errorCode(none)).code, 'invalid_api_key');
  const wrong = await fetch(`${srv.url}/api/v1/admin/keys`, { headers: { ...bearer(`${TOKEN}x`), 'X-Request-Id': 'refused-2' } });
  t.equal(wrong.status, 401);
  const asCustomer = await fetch(`${srv.url}/api/v1/admin/keys`, { method: 'POST', headers: { ...bearer(customer.key), 'X-Request-Id': 'refused-3' }, body: '{}' });
  t.equal(asCustomer.status, 403);
  t.match(await errorCode(asCustomer), { code: 'invalid_api_key', message: /not the admin token/ });

  const res = await admin(srv.url, 'GET', '/audit?action=key.list');
  t.equal(res.status, 200);
  const { data } = await res.json() as any;
  t.same(data.map((e: any) => [e.actor, e.outcome, e.request_id, e.detail.status]), [
    ['anonymous', 'refused', 'refused-1', 401],
    ['anonymous', 'refused', 'refused-2', 401],
  ], 'the two refused reads');
  const creates = (await (await admin(srv.url, 'GET', '/audit?action=key.create')).json() as any).data;
  t.same(creates.map((e: any) => [e.actor, e.outcome, e.request_id, e.detail]), [[`key:${customer.id}`, 'refused', 'refused-3', { status: 403, reason: 'not_admin' }]], "a customer's key is named");
  t.equal((await admin(srv.url, 'GET', '/nope')).status, 404, 'an unknown admin path is a 404 for the admin too');
});

t.test('keys over HTTP: create (secret once), list, get, patch, revoke; credits and accounts; the trail', async (t) => {
  const srv = await startApi(t, ['--admin-token', TOKEN]);
  const expires = new Date(Date.now() + 86_400_000).toISOString();
  const made = await admin(srv.url, 'POST', '/keys', { name: 'acme', credits: 5, rate_limit: 2, expires_at: expires, labels: { team: 'web' } }, { 'X-Request-Id': 'create-1' });
  t.equal(made.status, 201);
  const created = await made.json() as any;
  t.match(created, { id: /^key_/, key: /^cut_live_/, account: /^acct_/, credits: 15, mode: 'live', rate_limit: 2, expires_at: expires, labels: { team: 'web' }, revoked_at: null, name: 'acme' });

  // The key works, within its own rate limit.
  const acct = await fetch(`${srv.url}/api/v1/account`, { headers: bearer(created.key) });
  t.equal(acct.status, 200);
  t.equal(acct.headers.get('x-ratelimit-limit'), '2', "the key's own limit, not the server's");
  t.equal(((await acct.json()) as any).balance, 15);

  const second = await (await admin(srv.url, 'POST', '/keys', { account: created.account, mode: 'test' })).json() as any;
  t.match(second, { account: created.account, mode: 'test', credits: 15, rate_limit: null, expires_at: null });
  const other = await (await admin(srv.url, 'POST', '/keys', {})).json() as any;
  t.not(other.account, created.account, 'no account named: a new one');
  t.equal(other.credits, 10, 'with the free credits');
  t.equal((await errorCode(await admin(srv.url, 'POST', '/keys', { account: 'acct_nope' }))).status, 404);
  t.match(await errorCode(await admin(srv.url, 'POST', '/keys', { rate_limit: 0 })), { status: 400, code: 'invalid_request', message: /rate_limit/ });
  t.match(await errorCode(await admin(srv.url, 'POST', '/keys', { expires_at: 'tomorrow' })), { status: 400, message: /expires_at/ });
  t.match(await errorCode(await admin(srv.url, 'POST', '/keys', { secret: 'x' })), { status: 400, message: /secret/ });

  const page1 = await (await admin(srv.url, 'GET', `/keys?account=${created.account}&limit=1`)).json() as any;
  t.equal(page1.data.length, 1);
  t.equal(page1.data[0].id, created.id);
  t.ok(page1.next);
  const page2 = await (await admin(srv.url, 'GET', `/keys?account=${created.account}&limit=1&after=${page1.next}`)).json() as any;
  t.same(page2.data.map((k: any) => k.id), [second.id]);
  t.equal(page2.next, null);
  const all = await (await admin(srv.url, 'GET', '/keys')).json() as any;
  t.equal(all.data.length, 3);
  t.notOk(JSON.stringify(all).includes(created.key.slice(9)), 'never the secret in a listing');
  const got = await (await admin(srv.url, 'GET', `/keys/${created.id}`)).json() as any;
  t.equal(got.key, undefined, 'nor in a get');
  t.equal(got.hint, created.key.slice(-4));
  t.equal((await admin(srv.url, 'GET', '/keys/key_nope')).status, 404);

  const patched = await (await admin(srv.url, 'PATCH', `/keys/${created.id}`, { rate_limit: 7, labels: { team: 'shop' }, name: 'acme-2' })).json() as any;
  t.match(patched, { rate_limit: 7, labels: { team: 'shop' }, name: 'acme-2', expires_at: expires });
  const after = await fetch(`${srv.url}/api/v1/account`, { headers: bearer(created.key) });
  t.equal(after.headers.get('x-ratelimit-limit'), '7', 'the change holds from the next request');
  t.equal((await admin(srv.url, 'PATCH', '/keys/key_nope', { name: 'x' })).status, 404);
  t.equal((await errorCode(await admin(srv.url, 'PATCH', `/keys/${created.id}`, { mode: 'test' }))).status, 400, 'the mode is fixed');

  const topUp = await admin(srv.url, 'POST', `/accounts/${created.account}/credits`, { amount: 20, reason: 'invoice 2026-11' });
  t.same(await topUp.json(), { account: created.account, amount: 20, reason: 'invoice 2026-11', balance: 35 });
  const fix = await (await admin(srv.url, 'POST', `/accounts/${created.account}/credits`, { amount: -5, reason: 'double top-up' })).json() as any;
  t.equal(fix.balance, 30);
  t.match(await errorCode(await admin(srv.url, 'POST', `/accounts/${created.account}/credits`, { amount: -100, reason: 'too much' })), { status: 400, message: /below 0/ });
  t.match(await errorCode(await admin(srv.url, 'POST', `/accounts/${created.account}/credits`, { amount: 5 })), { status: 400, message: /reason/ });
  t.equal((await admin(srv.url, 'POST', '/accounts/acct_nope/credits', { amount: 5, reason: 'x' })).status, 404);
  const account = await (await admin(srv.url, 'GET', `/accounts/${created.account}`)).json() as any;
  t.match(account, { account_id: created.account, balance: 30, plan: 'paid', credits_used_this_month: 0 });
  t.equal(account.usage.length, 30, 'usage per day');

  const revoked = await admin(srv.url, 'DELETE', `/keys/${created.id}`, undefined, { 'X-Request-Id': 'revoke-1' });
  t.equal(revoked.status, 200);
  t.ok(((await revoked.json()) as any).revoked_at);
  t.equal((await fetch(`${srv.url}/api/v1/account`, { headers: bearer(created.key) })).status, 401, 'revoked at once');
  t.equal((await admin(srv.url, 'DELETE', '/keys/key_nope')).status, 404);

  const trail = await (await admin(srv.url, 'GET', '/audit?limit=500')).json() as any;
  const changes = trail.data.filter((e: any) => !['key.list', 'key.get', 'account.get', 'audit.list'].includes(e.action));
  t.same(changes.filter((e: any) => e.outcome === 'ok').map((e: any) => e.action), [
    'key.create', 'credits.add', 'key.create', 'key.create', 'key.update', 'credits.add', 'credits.add', 'key.revoke',
  ], 'every change done, in order');
  t.ok(trail.data.every((e: any) => e.outcome !== 'ok' || e.actor === 'admin'));
  t.match(changes.find((e: any) => e.request_id === 'create-1'), { action: 'key.create', target: created.id, detail: { rate_limit: 2, labels: { team: 'web' } } });
  t.match(changes.find((e: any) => e.request_id === 'revoke-1'), { action: 'key.revoke', target: created.id });
  const failed = trail.data.filter((e: any) => e.outcome === 'failed');
  t.ok(failed.length >= 8, `failed requests are recorded too (${failed.length})`);
  t.ok(failed.some((e: any) => e.action === 'credits.add' && e.detail.status === 400));
  t.notOk(JSON.stringify(trail).includes(created.key), 'no secret in the trail');
  t.ok(trail.data.every((e: any, i: number) => i === 0 || e.id > trail.data[i - 1].id), 'oldest first');

  const since = await (await admin(srv.url, 'GET', `/audit?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).json() as any;
  t.same(since.data, []);
  t.equal((await admin(srv.url, 'GET', '/audit?since=yesterday')).status, 400);
  const firstTwo = await (await admin(srv.url, 'GET', '/audit?action=key.create&limit=2')).json() as any;
  const rest = await (await admin(srv.url, 'GET', `/audit?action=key.create&limit=100&after=${firstTwo.next}`)).json() as any;
  t.equal(firstTwo.data.length + rest.data.length, trail.data.filter((e: any) => e.action === 'key.create').length + 0, 'pages add up');
});
