import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openStore, type Store } from '../src/store/db.js';
import { MIGRATIONS } from '../src/store/migrations.js';
import { CutoutError } from '../src/errors.js';
import { LIMITS } from '../src/limits.js';

const DAY = 86_400_000;

async function tempDir(t: Tap.Test): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-store-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A store whose clock the test moves. */
async function storeWithClock(t: Tap.Test, start = Date.UTC(2025, 5, 15, 12)): Promise<{ store: Store; clock: { now: number }; dir: string }> {
  const dir = await tempDir(t);
  const clock = { now: start };
  const store = await openStore(dir, { now: () => clock.now });
  t.teardown(() => store.close());
  return { store, clock, dir };
}

function run(accountId: string | null, credits: 0 | 1, extra: Partial<Parameters<Store['recordRun']>[0]> = {}) {
  return { id: crypto.randomUUID(), accountId, keyId: null, channel: 'api' as const, input: 'upload', size: credits ? 'full' as const : 'preview' as const, credits, ms: 12, ...extra };
}

t.test('migrations run once and are a no-op on reopen; data survives', async (t) => {
  const dir = await tempDir(t);
  const first = await openStore(path.join(dir, 'nested', 'data'));
  const { key, account } = await first.createKey({ name: 'a' });
  const version = await first.db.get<{ user_version: number }>('PRAGMA user_version');
  t.equal(version?.user_version, MIGRATIONS.length);
  const mode = await first.db.get<{ journal_mode: string }>('PRAGMA journal_mode');
  t.equal(mode?.journal_mode, 'wal');
  await first.close();

  const again = await openStore(path.join(dir, 'nested', 'data'));
  t.teardown(() => again.close());
  t.equal((await again.db.get<{ user_version: number }>('PRAGMA user_version'))?.user_version, MIGRATIONS.length);
  t.same(await again.authenticate(key), { accountId: account, keyId: (await again.listKeys())[0].id, test: false });
  t.equal(await again.balance(account), LIMITS.freeCredits);
});

t.test('a database newer than the code is refused', async (t) => {
  const dir = await tempDir(t);
  const store = await openStore(dir);
  await store.db.run(`PRAGMA user_version = ${MIGRATIONS.length + 1}`);
  await store.close();
  await t.rejects(openStore(dir), /newer than this cutout/);
});

t.test('a data directory that is a file, or a store that is not a database, is named in one line', async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, 'plain-file');
  await fs.writeFile(file, 'x');
  await t.rejects(openStore(file), { message: `Cannot use ${file} as the data directory: it is a file` });
  const notDb = path.join(dir, 'data');
  await fs.mkdir(notDb);
  await fs.writeFile(path.join(notDb, 'cutout.db'), 'this is not a database, and it is long enough to have a header'.repeat(4));
  await t.rejects(openStore(notDb), { message: `Cannot open the store ${path.join(notDb, 'cutout.db')}: file is not a database` });
  t.equal((await fs.readFile(path.join(notDb, 'cutout.db'), 'utf8')).slice(0, 12), 'this is not ', 'the file is left as it was');
});

t.test('a new key opens an account with the free grant; a charge takes one credit', async (t) => {
  const { store } = await storeWithClock(t);
  const created = await store.createKey({ name: 'shop' });
  t.match(created.key, /^cut_live_[A-Za-z0-9_-]{32}$/);
  t.equal(created.credits, 10);
  const grants = await store.db.all('SELECT delta, reason FROM ledger WHERE account_id = ?', [created.account]);
  t.same(grants, [{ delta: 10, reason: 'free_grant' }]);

  const charged = await store.recordRun(run(created.account, 1));
  t.same(charged, { creditsCharged: 1, creditsRemaining: 9 });
  const preview = await store.recordRun(run(created.account, 0));
  t.same(preview, { creditsCharged: 0, creditsRemaining: 9 });
  t.equal(await store.balance(created.account), 9);

  // A second key on the same account shares the balance and gets no second grant.
  const second = await store.createKey({ accountId: created.account, test: true });
  t.equal(second.account, created.account);
  t.equal(second.credits, 9);
  await t.rejects(store.createKey({ accountId: 'acct_nope' }), { code: 'invalid_request' });

  const bought = await store.addCredits(second.id, 5);
  t.same(bought, { accountId: created.account, balance: 14 });
  t.equal((await store.account(created.account)).plan, 'paid');
  await t.rejects(store.addCredits(created.account, 0), { code: 'invalid_request' });
  await t.rejects(store.addCredits('key_unknown', 3), /No account or API key/);
});

t.test('a charge at balance 0 is refused and writes nothing; previews still run', async (t) => {
  const { store } = await storeWithClock(t);
  const { account } = await store.createKey({});
  for (let i = 0; i < LIMITS.freeCredits; i++) await store.recordRun(run(account, 1));
  t.equal(await store.balance(account), 0);
  const refused = run(account, 1);
  const err = await store.recordRun(refused).catch((e: unknown) => e);
  t.ok(err instanceof CutoutError);
  t.equal((err as CutoutError).code, 'insufficient_credits');
  t.equal((err as CutoutError).status, 402);
  t.notOk(await store.db.get('SELECT 1 FROM runs WHERE id = ?', [refused.id]), 'no run row for a refused charge');
  t.same(await store.recordRun(run(account, 0)), { creditsCharged: 0, creditsRemaining: 0 });
});

t.test('concurrent charges never overdraw', async (t) => {
  const { store } = await storeWithClock(t);
  const { account } = await store.createKey({});
  const outcomes = await Promise.allSettled(Array.from({ length: 15 }, () => store.recordRun(run(account, 1))));
  t.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 10);
  t.equal(outcomes.filter((o) => o.status === 'rejected' && (o.reason as CutoutError).code === 'insufficient_credits').length, 5);
  t.equal(await store.balance(account), 0);
});

t.test('a failing insert inside the transaction leaves no charge and no result file', async (t) => {
  const { store } = await storeWithClock(t);
  const { account } = await store.createKey({});
  const id = crypto.randomUUID();
  await store.recordRun(run(account, 0, { id }));
  // Same run id again: the charge row goes in first, then the run insert violates the primary key.
  const file = await store.writeResultFile(id, 'png', Buffer.from('not really a png'));
  const retry = run(account, 1, { id, result: { path: file, contentType: 'image/png', width: 1, height: 1 } });
  await t.rejects(store.recordRun(retry), /UNIQUE constraint failed: runs.id/);
  t.equal(await store.balance(account), 10, 'the charge was rolled back');
  t.equal((await store.db.all("SELECT 1 FROM ledger WHERE reason = 'charge'")).length, 0);
  await t.rejects(fs.stat(file), { code: 'ENOENT' }, 'the result file of the failed run is deleted');
  t.equal(await store.getResult(id, 3600), null);
});

t.test('keys: malformed, unknown and revoked keys do not authenticate', async (t) => {
  const { store } = await storeWithClock(t);
  const live = await store.createKey({ name: 'live' });
  const test = await store.createKey({ name: 'test', test: true });
  t.match(test.key, /^cut_test_/);
  t.same(await store.authenticate(test.key), { accountId: test.account, keyId: test.id, test: true });
  t.equal(await store.authenticate('cut_live_short'), null);
  t.equal(await store.authenticate(live.key.slice(0, -1) + (live.key.endsWith('A') ? 'B' : 'A')), null);
  t.equal(await store.authenticate(live.key.replace('cut_live_', 'cut_test_')), null);
  t.ok(await store.authenticate(live.key));
  t.equal(await store.revokeKey(live.id), true);
  t.equal(await store.revokeKey(live.id), false, 'revoking twice reports it was already revoked');
  t.equal(await store.authenticate(live.key), null);
  await t.rejects(store.revokeKey('key_nope'), { code: 'invalid_request' });
  const listed = await store.listKeys();
  t.same(listed.map((k) => [k.id, k.test, k.hint, k.revokedAt !== null]), [
    [live.id, false, live.key.slice(-4), true],
    [test.id, true, test.key.slice(-4), false],
  ]);
  const stored = await store.db.all<{ hash: string }>('SELECT hash FROM api_keys');
  t.notOk(stored.some((r) => r.hash.includes(live.key) || r.hash.includes(test.key)), 'only hashes are stored');
});

t.test('account and usage: this month, 30 UTC days newest first, local runs apart', async (t) => {
  const { store, clock } = await storeWithClock(t, Date.UTC(2025, 5, 3, 10)); // 3 June
  const { account } = await store.createKey({});
  const at = async (ms: number, accountId: string | null, credits: 0 | 1) => { clock.now = ms; await store.recordRun(run(accountId, credits)); };
  await at(Date.UTC(2025, 5, 3, 9), account, 1);
  await at(Date.UTC(2025, 5, 3, 8), account, 0);
  await at(Date.UTC(2025, 5, 1, 0, 0, 1), account, 1);
  await at(Date.UTC(2025, 4, 31, 23, 59), account, 1); // May: counts in usage, not in this month
  await at(Date.UTC(2025, 4, 1), account, 1); // 33 days before: outside the usage window
  await at(Date.UTC(2025, 5, 2), null, 0); // a local CLI run
  clock.now = Date.UTC(2025, 5, 3, 10);

  const info = await store.account(account);
  t.same(info, { accountId: account, balance: 6, plan: 'free', test: false, creditsUsedThisMonth: 2, requestsThisMonth: 3 });
  const days = await store.usage(account);
  t.equal(days.length, 30);
  t.same(days.slice(0, 4), [
    { date: '2025-06-03', credits: 1, requests: 2 },
    { date: '2025-06-02', credits: 0, requests: 0 },
    { date: '2025-06-01', credits: 1, requests: 1 },
    { date: '2025-05-31', credits: 1, requests: 1 },
  ]);
  t.equal(days[29].date, '2025-05-05');
  t.equal(days.reduce((n, d) => n + d.requests, 0), 4);

  t.same(await store.account(null), { accountId: null, balance: 0, plan: 'local', test: false, creditsUsedThisMonth: 0, requestsThisMonth: 1 });
  t.same((await store.usage(null))[1], { date: '2025-06-02', credits: 0, requests: 1 });
  await t.rejects(store.recordRun(run(null, 1)), /needs an account/);
});

t.test('results: served until the retention, then purged with their files; stray files too', async (t) => {
  const { store, clock, dir } = await storeWithClock(t);
  const { account } = await store.createKey({});
  const id = crypto.randomUUID();
  const file = await store.writeResultFile(id, 'png', Buffer.from([1, 2, 3]));
  t.equal(path.dirname(file), path.join(dir, 'results'));
  await store.recordRun(run(account, 1, { id, result: { path: file, contentType: 'image/png', width: 4, height: 3 } }));
  const stray = path.join(dir, 'results', `${crypto.randomUUID()}.png`);
  await fs.writeFile(stray, 'left by a crash');
  await fs.utimes(stray, new Date(clock.now - 2 * DAY), new Date(clock.now - 2 * DAY));

  t.match(await store.getResult(id, 3600), { jobId: id, path: file, contentType: 'image/png', width: 4, height: 3 });
  clock.now += 3600 * 1000;
  t.equal(await store.getResult(id, 3600), null, 'expired at the retention even before a purge');
  t.equal(await store.purgeResults(3600), 1);
  await t.rejects(fs.stat(file), { code: 'ENOENT' });
  await t.rejects(fs.stat(stray), { code: 'ENOENT' });
  t.equal((await store.db.all('SELECT 1 FROM results')).length, 0);
});

t.test('idempotency keys: claim, pending, mismatch, replay, release, expiry', async (t) => {
  const { store, clock } = await storeWithClock(t);
  const { account } = await store.createKey({});
  const ref = { accountId: account, endpoint: 'remove', key: 'k1' };
  const ttl = 3600;
  t.same(await store.claimIdempotencyKey(ref, 'fp1', ttl), { state: 'claimed' });
  t.same(await store.claimIdempotencyKey(ref, 'fp1', ttl), { state: 'pending' });
  t.same(await store.claimIdempotencyKey(ref, 'fp2', ttl), { state: 'mismatch' });
  await store.completeIdempotencyKey(ref, { id: 'x', credits_charged: 1 });
  t.same(await store.claimIdempotencyKey(ref, 'fp1', ttl), { state: 'done', response: { id: 'x', credits_charged: 1 } });
  t.same(await store.claimIdempotencyKey({ ...ref, endpoint: 'jobs' }, 'fp9', ttl), { state: 'claimed' }, 'scoped per endpoint');
  await store.releaseIdempotencyKey({ ...ref, endpoint: 'jobs' });
  t.same(await store.claimIdempotencyKey({ ...ref, endpoint: 'jobs' }, 'fp8', ttl), { state: 'claimed' }, 'a released key is free again');
  clock.now += ttl * 1000;
  t.same(await store.claimIdempotencyKey(ref, 'fp2', ttl), { state: 'claimed' }, 'after the window the key is new');
  await store.resetIdempotencyKeys(ttl);
  t.same(
    await store.db.all("SELECT endpoint FROM idempotency_keys WHERE state = 'pending'"),
    [{ endpoint: 'remove' }],
    'a reset drops the expired claim and keeps the fresh one of a live process',
  );
});
