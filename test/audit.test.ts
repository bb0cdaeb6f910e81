/**
 * The audit trail (store.audit) and what issue 56 added to keys and credits, on both engines:
 * events are append-only by the database itself (no UPDATE, DELETE or TRUNCATE gets through, from
 * any program), a change and its event commit together, the trail pages by since/action, and a
 * key's expiry is judged by the store's clock.
 */
import t from 'tap';
import { CutoutError } from '../src/errors.js';
import type { AuditEvent } from '../src/store/db.js';
import { forEachEngine, openTestStore } from './helpers/stores.js';

forEachEngine('the database refuses to edit or delete an audit event', async (t, kind) => {
  const { store } = await openTestStore(t, kind);
  const first = await store.audit.append({ actor: 'admin', action: 'key.list', outcome: 'ok', requestId: 'req-1' });
  t.match(first, { id: Number, actor: 'admin', action: 'key.list', outcome: 'ok', requestId: 'req-1', target: null, detail: null });
  await t.rejects(store.db.run("UPDATE audit_events SET outcome = 'refused' WHERE id = ?", [first.id]), /append-only/, 'UPDATE refused');
  await t.rejects(store.db.run('DELETE FROM audit_events WHERE id = ?', [first.id]), /append-only/, 'DELETE refused');
  await t.rejects(store.db.run('DELETE FROM audit_events'), /append-only/, 'DELETE of all refused');
  if (kind === 'postgres') await t.rejects(store.db.run('TRUNCATE audit_events'), /append-only/, 'TRUNCATE refused');
  const rows = await store.db.all<{ outcome: string }>('SELECT outcome FROM audit_events');
  t.same(rows, [{ outcome: 'ok' }], 'the event is still there, unchanged');
});

forEachEngine('a key or credit change commits with its event; the trail pages by since and action', async (t, kind) => {
  const { store } = await openTestStore(t, kind);
  const heard: AuditEvent[] = [];
  const actor = { actor: 'cli:alice', requestId: null, onRecorded: (e: AuditEvent) => heard.push(e) };
  const before = Date.now() - 60_000;
  const created = await store.keys.create({ name: 'shop', rateLimit: 5, labels: { team: 'web' }, expiresAt: Date.now() + 3_600_000 }, actor);
  await store.ledger.addCredits(created.account, 7, { note: 'invoice 12', audit: actor });
  await store.ledger.addCredits(created.account, -2, { note: 'refund of a double charge', audit: actor });
  await t.rejects(store.ledger.addCredits(created.account, -100, { note: 'too much', audit: actor }), { code: 'invalid_request' }, 'a correction below 0 is refused');
  await store.keys.update(created.id, { rateLimit: null, labels: { team: 'shop' } }, actor);
  await t.rejects(store.keys.update('key_nope', { name: 'x' }, actor), { code: 'not_found' });
  t.equal(await store.keys.revoke(created.id, actor), true);

  t.same(heard.map((e) => e.action), ['key.create', 'credits.add', 'credits.add', 'key.update', 'key.revoke'], 'one event per change that committed, none for the refused ones');
  t.ok(heard.every((e) => e.actor === 'cli:alice' && e.outcome === 'ok'));
  t.notOk(JSON.stringify(heard).includes(created.key), 'the secret is never in the trail');
  t.match(heard[0], { target: created.id, detail: { account: created.account, rate_limit: 5, labels: { team: 'web' }, new_account: true } });
  t.match(heard[2], { target: created.account, detail: { amount: -2, reason: 'refund of a double charge', balance: 15 } });
  const ledger = await store.db.all<{ delta: number | string; reason: string; note: string | null }>('SELECT delta, reason, note FROM ledger WHERE account_id = ? ORDER BY id', [created.account]);
  t.same(ledger.map((r) => [Number(r.delta), r.reason, r.note]), [[10, 'free_grant', null], [7, 'purchase', 'invoice 12'], [-2, 'correction', 'refund of a double charge']]);

  const all = await store.audit.list({ since: before, limit: 2 });
  t.equal(all.events.length, 2);
  t.ok(all.next, 'a next page');
  const rest = await store.audit.list({ since: before, after: all.next, limit: 10 });
  t.same([...all.events, ...rest.events].map((e) => e.id), heard.map((e) => e.id), 'pages in order, nothing twice');
  t.equal(rest.next, null);
  t.same((await store.audit.list({ action: 'credits.add', limit: 10 })).events.map((e) => e.detail?.amount), [7, -2]);
  t.same((await store.audit.list({ since: Date.now() + 60_000, limit: 10 })).events, [], 'nothing since the future');

  const more = [await store.keys.create({ accountId: created.account }), await store.keys.create({})];
  const first = await store.keys.page({ accountId: created.account, limit: 1 });
  t.same(first.keys.map((k) => k.id), [created.id], 'keys page by account, oldest first');
  const second = await store.keys.page({ accountId: created.account, after: first.next, limit: 5 });
  t.same([second.keys.map((k) => k.id), second.next], [[more[0].id], null], 'the next page ends the account');
  t.equal((await store.keys.page({ limit: 10 })).keys.length, 3, 'without an account: all keys');
  const info = await store.keys.get(created.id);
  t.match(info, { rateLimit: null, labels: { team: 'shop' }, revokedAt: String, expiresAt: String });
});

forEachEngine("a key's expiry is judged by the store's clock; its rate limit comes with it", async (t, kind) => {
  let now = Date.now();
  const { store } = await openTestStore(t, kind, { now: () => now });
  const created = await store.keys.create({ rateLimit: 3, expiresAt: now + 10_000 });
  t.match(await store.keys.authenticate(created.key), { keyId: created.id, rateLimit: 3 });
  if (kind === 'sqlite') {
    // SQLite's store clock is the process's, injectable: moved past the expiry.
    now += 20_000;
  } else {
    // PostgreSQL's is the database's own (clock.ts): the injected one does not count, so the expiry moves instead.
    now += 20_000;
    t.ok(await store.keys.authenticate(created.key), 'a process clock that runs ahead does not expire a key on PostgreSQL');
    await store.keys.update(created.id, { expiresAt: Date.now() - 1000 });
  }
  const err = await store.keys.authenticate(created.key).catch((e: unknown) => e);
  t.ok(err instanceof CutoutError, 'an expired key throws');
  t.match(err, { code: 'invalid_api_key', status: 401, reason: 'key_expired' });
  await store.keys.update(created.id, { expiresAt: null });
  t.ok(await store.keys.authenticate(created.key), 'cleared: valid again');
  await t.rejects(store.keys.create({ rateLimit: 0 }), { code: 'invalid_request', param: 'rate_limit' });
  await t.rejects(store.keys.create({ labels: { 'bad name': 'x' } }), { code: 'invalid_request', param: 'labels' });
});
