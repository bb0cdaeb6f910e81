import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { IdempotencyClaimLost, openStore, Store, type NewJob, type StoreKind } from '../src/store/db.js';
import { MIGRATIONS } from '../src/store/migrations.js';
import { PG_MIGRATIONS } from '../src/store/migrations-postgres.js';
import { POSTGRES_NOW_MS } from '../src/store/clock.js';
import type { PostgresDb } from '../src/store/postgres.js';
import { CutoutError } from '../src/errors.js';
import { LIMITS } from '../src/limits.js';
import { forEachEngine, openTestStore, storeUrl, tempDir } from './helpers/stores.js';

const DAY = 86_400_000;

/** A store of `kind` whose clock the test moves. */
async function storeWithClock(t: Tap.Test, kind: StoreKind, start = Date.UTC(2025, 5, 15, 12)): Promise<{ store: Store; clock: { now: number }; dir: string }> {
  const clock = { now: start };
  const { store, dir } = await openTestStore(t, kind, { now: () => clock.now });
  return { store, clock, dir };
}

function run(accountId: string | null, credits: 0 | 1, extra: Partial<Parameters<Store['ledger']['recordRun']>[0]> = {}) {
  return { id: crypto.randomUUID(), accountId, keyId: null, channel: 'api' as const, input: 'upload', size: credits ? 'full' as const : 'preview' as const, credits, ms: 12, ...extra };
}

t.test('migrations run once and are a no-op on reopen; data survives', async (t) => {
  const dir = await tempDir(t);
  const first = await openStore(path.join(dir, 'nested', 'data'));
  const { key, account } = await first.keys.create({ name: 'a' });
  const version = await first.db.get<{ user_version: number }>('PRAGMA user_version');
  t.equal(version?.user_version, MIGRATIONS.length);
  const mode = await first.db.get<{ journal_mode: string }>('PRAGMA journal_mode');
  t.equal(mode?.journal_mode, 'wal');
  await first.close();

  const again = await openStore(path.join(dir, 'nested', 'data'));
  t.teardown(() => again.close());
  t.equal((await again.db.get<{ user_version: number }>('PRAGMA user_version'))?.user_version, MIGRATIONS.length);
  t.same(await again.keys.authenticate(key), { accountId: account, keyId: (await again.keys.list())[0].id, test: false, rateLimit: null });
  t.equal(await again.ledger.balance(account), LIMITS.freeCredits);
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

forEachEngine('a new key opens an account with the free grant; a charge takes one credit', async (t, kind) => {
  const { store } = await storeWithClock(t, kind);
  const created = await store.keys.create({ name: 'shop' });
  t.match(created.key, /^cut_live_[A-Za-z0-9_-]{32}$/);
  t.equal(created.credits, 10);
  const grants = await store.db.all('SELECT delta, reason FROM ledger WHERE account_id = ?', [created.account]);
  t.same(grants, [{ delta: 10, reason: 'free_grant' }]);

  const charged = await store.ledger.recordRun(run(created.account, 1));
  t.same(charged, { creditsCharged: 1, creditsRemaining: 9 });
  const preview = await store.ledger.recordRun(run(created.account, 0));
  t.same(preview, { creditsCharged: 0, creditsRemaining: 9 });
  t.equal(await store.ledger.balance(created.account), 9);

  // A second key on the same account shares the balance and gets no second grant.
  const second = await store.keys.create({ accountId: created.account, test: true });
  t.equal(second.account, created.account);
  t.equal(second.credits, 9);
  await t.rejects(store.keys.create({ accountId: 'acct_nope' }), { code: 'invalid_request' });

  const bought = await store.ledger.addCredits(second.id, 5);
  t.same(bought, { accountId: created.account, balance: 14 });
  t.equal((await store.ledger.account(created.account)).plan, 'paid');
  await t.rejects(store.ledger.addCredits(created.account, 0), { code: 'invalid_request' });
  await t.rejects(store.ledger.addCredits('key_unknown', 3), /No account or API key/);
});

forEachEngine('a charge at balance 0 is refused and writes nothing; previews still run', async (t, kind) => {
  const { store } = await storeWithClock(t, kind);
  const { account } = await store.keys.create({});
  for (let i = 0; i < LIMITS.freeCredits; i++) await store.ledger.recordRun(run(account, 1));
  t.equal(await store.ledger.balance(account), 0);
  const refused = run(account, 1);
  const err = await store.ledger.recordRun(refused).catch((e: unknown) => e);
  t.ok(err instanceof CutoutError);
  t.equal((err as CutoutError).code, 'insufficient_credits');
  t.equal((err as CutoutError).status, 402);
  t.notOk(await store.db.get('SELECT 1 FROM runs WHERE id = ?', [refused.id]), 'no run row for a refused charge');
  t.same(await store.ledger.recordRun(run(account, 0)), { creditsCharged: 0, creditsRemaining: 0 });
});

forEachEngine('concurrent charges never overdraw, from one connection or two servers', async (t, kind) => {
  const { store, dir, url } = await openTestStore(t, kind);
  const other = await openStore(dir, { url });
  t.teardown(() => other.close());
  const { account } = await store.keys.create({});
  const outcomes = await Promise.allSettled(Array.from({ length: 15 }, (_, i) => (i % 2 ? other : store).ledger.recordRun(run(account, 1))));
  t.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 10);
  t.equal(outcomes.filter((o) => o.status === 'rejected' && (o.reason as CutoutError).code === 'insufficient_credits').length, 5);
  t.equal(await store.ledger.balance(account), 0);
});

t.test('[postgres] a charge does not wait for another transaction still writing a run or a job of the same account', async (t) => {
  const { store, dir, url } = await openTestStore(t, 'postgres');
  const other = await openStore(dir, { url });
  t.teardown(() => other.close());
  const { account } = await store.keys.create({});
  // As a charge writing its large result, or a job creation writing its input, does before it
  // commits: a row that references the account (its foreign key holds a key-share lock on it).
  let charge: Promise<string> | undefined;
  const outcome = await store.db.transaction(async (tx) => {
    await tx.run("INSERT INTO runs (id, account_id, key_id, channel, input, size, credits, ms, created_at) VALUES (?, ?, NULL, 'api', 'upload', 'full', 1, 1, ?)", [
      crypto.randomUUID(), account, Date.now(),
    ]);
    charge = other.ledger.recordRun(run(account, 1)).then(() => 'charged');
    const waited = new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 3000).unref());
    return Promise.race([charge, waited]);
  });
  await charge; // if it waited, it goes through once the first transaction has committed
  t.equal(outcome, 'charged', 'the other charge committed while the first transaction was still open');
  t.equal(await store.ledger.balance(account), LIMITS.freeCredits - 1);
});

forEachEngine('a failing insert inside the transaction leaves no charge and no stored result', async (t, kind) => {
  const { store, dir } = await storeWithClock(t, kind);
  const { account } = await store.keys.create({});
  const id = crypto.randomUUID();
  await store.ledger.recordRun(run(account, 0, { id }));
  // Same run id again: the run insert violates the primary key, so nothing of the charge stays.
  const retry = run(account, 1, { id, result: { data: Buffer.from('not really a png'), ext: 'png', name: `${id}.2`, contentType: 'image/png', width: 1, height: 1 } });
  await t.rejects(store.ledger.recordRun(retry), /UNIQUE constraint failed: runs.id|duplicate key value violates unique constraint "runs_pkey"/);
  t.equal(await store.ledger.balance(account), 10, 'the charge was rolled back');
  t.equal((await store.db.all("SELECT 1 FROM ledger WHERE reason = 'charge'")).length, 0);
  t.same(await fs.readdir(path.join(dir, 'results')).catch(() => []), [], 'no result file of the failed run is left');
  t.equal(await store.results.get(id, 3600), null);
});

forEachEngine('a run is charged at most once, whatever is retried above', async (t, kind) => {
  const { store } = await storeWithClock(t, kind);
  const { account } = await store.keys.create({});
  const id = crypto.randomUUID();
  await store.ledger.recordRun(run(account, 1, { id }));
  // A second charge with the same run id (another attempt of the same job) violates the ledger's unique charge.
  await t.rejects(store.db.run("INSERT INTO ledger (account_id, delta, reason, ref, created_at) VALUES (?, -1, 'charge', ?, 0)", [account, id]));
  t.equal(await store.ledger.balance(account), 9);
});

forEachEngine('keys: malformed, unknown and revoked keys do not authenticate', async (t, kind) => {
  const { store } = await storeWithClock(t, kind);
  const live = await store.keys.create({ name: 'live' });
  const test = await store.keys.create({ name: 'test', test: true });
  t.match(test.key, /^cut_test_/);
  t.same(await store.keys.authenticate(test.key), { accountId: test.account, keyId: test.id, test: true, rateLimit: null });
  t.equal(await store.keys.authenticate('cut_live_short'), null);
  t.equal(await store.keys.authenticate(live.key.slice(0, -1) + (live.key.endsWith('A') ? 'B' : 'A')), null);
  t.equal(await store.keys.authenticate(live.key.replace('cut_live_', 'cut_test_')), null);
  t.ok(await store.keys.authenticate(live.key));
  t.equal(await store.keys.revoke(live.id), true);
  t.equal(await store.keys.revoke(live.id), false, 'revoking twice reports it was already revoked');
  t.equal(await store.keys.authenticate(live.key), null);
  await t.rejects(store.keys.revoke('key_nope'), { code: 'invalid_request' });
  const listed = await store.keys.list();
  t.same(listed.map((k) => [k.id, k.test, k.hint, k.revokedAt !== null]), [
    [live.id, false, live.key.slice(-4), true],
    [test.id, true, test.key.slice(-4), false],
  ]);
  const stored = await store.db.all<{ hash: string }>('SELECT hash FROM api_keys');
  t.notOk(stored.some((r) => r.hash.includes(live.key) || r.hash.includes(test.key)), 'only hashes are stored');
});

forEachEngine('account and usage: this month, 30 UTC days newest first, local runs apart', async (t, kind) => {
  const { store, clock } = await storeWithClock(t, kind, Date.UTC(2025, 5, 3, 10)); // 3 June
  const { account } = await store.keys.create({});
  const at = async (ms: number, accountId: string | null, credits: 0 | 1) => { clock.now = ms; await store.ledger.recordRun(run(accountId, credits)); };
  await at(Date.UTC(2025, 5, 3, 9), account, 1);
  await at(Date.UTC(2025, 5, 3, 8), account, 0);
  await at(Date.UTC(2025, 5, 1, 0, 0, 1), account, 1);
  await at(Date.UTC(2025, 4, 31, 23, 59), account, 1); // May: counts in usage, not in this month
  await at(Date.UTC(2025, 4, 1), account, 1); // 33 days before: outside the usage window
  await at(Date.UTC(2025, 5, 2), null, 0); // a local CLI run
  clock.now = Date.UTC(2025, 5, 3, 10);

  const info = await store.ledger.account(account);
  t.same(info, { accountId: account, balance: 6, plan: 'free', test: false, creditsUsedThisMonth: 2, requestsThisMonth: 3 });
  const days = await store.ledger.usage(account);
  t.equal(days.length, 30);
  t.same(days.slice(0, 4), [
    { date: '2025-06-03', credits: 1, requests: 2 },
    { date: '2025-06-02', credits: 0, requests: 0 },
    { date: '2025-06-01', credits: 1, requests: 1 },
    { date: '2025-05-31', credits: 1, requests: 1 },
  ]);
  t.equal(days[29].date, '2025-05-05');
  t.equal(days.reduce((n, d) => n + d.requests, 0), 4);

  t.same(await store.ledger.account(null), { accountId: null, balance: 0, plan: 'local', test: false, creditsUsedThisMonth: 0, requestsThisMonth: 1 });
  t.same((await store.ledger.usage(null))[1], { date: '2025-06-02', credits: 0, requests: 1 });
  await t.rejects(store.ledger.recordRun(run(null, 1)), /needs an account/);
});

forEachEngine('results: served with their bytes until the retention, then purged', async (t, kind) => {
  const { store, clock, dir } = await storeWithClock(t, kind);
  const { account } = await store.keys.create({});
  const id = crypto.randomUUID();
  const bytes = crypto.randomBytes(300_000);
  await store.ledger.recordRun(run(account, 1, { id, result: { data: bytes, ext: 'png', contentType: 'image/png', width: 4, height: 3 } }));
  const files = await fs.readdir(path.join(dir, 'results')).catch(() => [] as string[]);
  // SQLite keeps the bytes as a file in the data directory; PostgreSQL in the database, none on disk.
  t.same(files, kind === 'sqlite' ? [`${id}.png`] : []);
  const stored = await store.results.get(id, 3600);
  t.match(stored, { jobId: id, contentType: 'image/png', width: 4, height: 3 });
  t.ok(stored?.data.equals(bytes), 'the same bytes come back');
  clock.now += 3600 * 1000;
  t.equal(await store.results.get(id, 3600), null, 'expired at the retention even before a purge');
  // Every server of a fleet purges: at once, each result goes exactly once.
  const purged = await Promise.all([store.results.purge(3600), store.results.purge(3600), store.results.purge(3600)]);
  t.equal(purged.reduce((a, b) => a + b, 0), 1);
  t.same(await fs.readdir(path.join(dir, 'results')).catch(() => []), []);
  t.equal((await store.db.all('SELECT 1 FROM results')).length, 0);
});

t.test('[sqlite] stray result files older than the retention are purged', async (t) => {
  const { store, clock, dir } = await storeWithClock(t, 'sqlite');
  await fs.mkdir(path.join(dir, 'results'), { recursive: true });
  const stray = path.join(dir, 'results', `${crypto.randomUUID()}.png`);
  await fs.writeFile(stray, 'left by a crash');
  await fs.utimes(stray, new Date(clock.now - 2 * DAY), new Date(clock.now - 2 * DAY));
  t.equal(await store.results.purge(3600), 0);
  await t.rejects(fs.stat(stray), { code: 'ENOENT' });
});

forEachEngine('idempotency keys: claim, pending, mismatch, replay, release, expiry', async (t, kind) => {
  const { store, clock } = await storeWithClock(t, kind);
  const { account } = await store.keys.create({});
  const ref = { accountId: account, endpoint: 'remove', key: 'k1' };
  const ttl = 3600;
  t.same(await store.idempotency.claim(ref, 'fp1', ttl), { state: 'claimed' });
  t.same(await store.idempotency.claim(ref, 'fp1', ttl), { state: 'pending' });
  t.same(await store.idempotency.claim(ref, 'fp2', ttl), { state: 'mismatch' });
  await store.idempotency.complete(ref, { id: 'x', credits_charged: 1 });
  t.same(await store.idempotency.claim(ref, 'fp1', ttl), { state: 'done', response: { id: 'x', credits_charged: 1 } });
  t.same(await store.idempotency.claim({ ...ref, endpoint: 'jobs' }, 'fp9', ttl), { state: 'claimed' }, 'scoped per endpoint');
  await store.idempotency.release({ ...ref, endpoint: 'jobs' });
  t.same(await store.idempotency.claim({ ...ref, endpoint: 'jobs' }, 'fp8', ttl), { state: 'claimed' }, 'a released key is free again');
  await elapse(store, clock, ttl * 1000);
  t.same(await store.idempotency.claim(ref, 'fp2', ttl), { state: 'claimed' }, 'after the window the key is new');
  await store.idempotency.reset(ttl);
  t.same(
    await store.db.all("SELECT endpoint FROM idempotency_keys WHERE state = 'pending'"),
    [{ endpoint: 'remove' }],
    'a reset drops the expired claim and keeps the fresh one of a live process',
  );
});

/**
 * Lets `ms` pass for what the store judges by its clock (src/store/clock.ts). SQLite reads this
 * process's clock, which the test moves. PostgreSQL reads its own now(), which no test moves: the
 * times it wrote for leases, heartbeats and Idempotency-Key claims are moved back instead, which
 * is the same to every comparison with now().
 */
async function elapse(store: Store, clock: { now: number }, ms: number): Promise<void> {
  clock.now += ms;
  if (store.kind !== 'postgres') return;
  await store.db.run('UPDATE jobs SET lease_until = lease_until - ? WHERE lease_until IS NOT NULL', [ms]);
  await store.db.run('UPDATE idempotency_keys SET created_at = created_at - ?', [ms]);
  await store.db.run('UPDATE servers SET heartbeat_at = heartbeat_at - ?', [ms]);
  await store.db.run('UPDATE callback_deliveries SET lease_until = lease_until - ? WHERE lease_until IS NOT NULL', [ms]);
}

/** Two server identities of this host (the store's `owner`): neither heartbeats, so each is silent to the other. */
function twoIdentities(): [string, string] {
  return [`${os.hostname()}:${process.pid}:1:aaaaaa`, `${os.hostname()}:${process.pid}:2:bbbbbb`];
}

/** Two stores on one database under two server identities, as two servers of a fleet (closed in teardown). */
async function twoServers(t: Tap.Test, kind: StoreKind): Promise<{ a: Store; b: Store; idA: string; idB: string }> {
  const { dir, url } = await openTestStore(t, kind);
  const [idA, idB] = twoIdentities();
  const a = await openStore(dir, { url, owner: idA });
  const b = await openStore(dir, { url, owner: idB });
  t.teardown(() => Promise.all([a.close(), b.close()]));
  return { a, b, idA, idB };
}

async function countRuns(store: Store, accountId: string): Promise<number> {
  return Number((await store.db.get<{ n: number | string }>('SELECT COUNT(*) AS n FROM runs WHERE account_id = ?', [accountId]))?.n);
}

forEachEngine('idempotency: a claim taken over from a silent server; its late charge rolls back, its release keeps the new claim', async (t, kind) => {
  const { a, b, idA, idB } = await twoServers(t, kind);
  const { account } = await a.keys.create({});
  const ref = { accountId: account, endpoint: 'remove', key: 'takeover' };
  const ttl = 3600;
  t.same(await a.idempotency.claim(ref, 'fp', ttl), { state: 'claimed' });
  t.same(await b.idempotency.claim(ref, 'fp', ttl), { state: 'claimed' }, 'A is silent: B takes its claim over');

  // A was only slow: it now commits its charge, sealing the key in the same transaction.
  const late = await a.ledger.recordRun(run(account, 1), { within: (tx) => a.idempotency.complete(ref, { id: 'from-a' }, tx) }).catch((e: unknown) => e);
  t.type(late, IdempotencyClaimLost, 'the seal of a lost claim throws');
  t.equal(await a.ledger.balance(account), LIMITS.freeCredits, 'and its charge rolled back');
  t.equal(await countRuns(a, account), 0, 'no run recorded either');
  await a.idempotency.release(ref);
  t.equal((await a.idempotency.pending(ref))?.owner, idB, "A's release left B's claim in place");

  await b.ledger.recordRun(run(account, 1), { within: (tx) => b.idempotency.complete(ref, { id: 'from-b' }, tx) });
  t.equal(await b.ledger.balance(account), LIMITS.freeCredits - 1, 'charged once, by the new owner');
  t.same(await a.idempotency.claim(ref, 'fp', ttl), { state: 'done', response: { id: 'from-b' } }, "every server replays B's answer");
  await t.rejects(a.idempotency.complete(ref, { id: 'again' }), IdempotencyClaimLost, 'a done key is never overwritten');
});

forEachEngine('idempotency: a waiter that gave up drops only the exact claim it saw', async (t, kind) => {
  const { a, b, idA, idB } = await twoServers(t, kind);
  const { account } = await a.keys.create({});
  const ref = { accountId: account, endpoint: 'jobs', key: 'stale' };
  t.same(await a.idempotency.claim(ref, 'fp', 3600), { state: 'claimed' });
  const seen = (await a.idempotency.pending(ref))!;
  t.equal(seen.owner, idA);
  await b.idempotency.releaseStale(ref, { owner: seen.owner, createdAt: seen.createdAt - 1 });
  await b.idempotency.releaseStale(ref, { owner: idB, createdAt: seen.createdAt });
  t.same(await b.idempotency.pending(ref).then((p) => p?.owner), idA, 'another claim than the one seen stays');
  await b.idempotency.release(ref);
  t.equal((await b.idempotency.pending(ref))?.owner, idA, "a server's release drops only its own claim");
  await b.idempotency.releaseStale(ref, seen);
  t.equal(await b.idempotency.pending(ref), null, 'the exact claim seen is dropped');
});

// PostgreSQL only: SQLite has one writer at a time, so two takeovers cannot interleave there.
t.test('[postgres] idempotency: servers taking one dead claim over at once: one claims, the others wait (no error)', async (t) => {
  const { dir, url } = await openTestStore(t, 'postgres');
  const ids = [0, 1, 2, 3, 4, 5, 6].map((i) => `${os.hostname()}:${process.pid}:${i + 1}:cccccc`);
  const stores = await Promise.all(ids.map((owner) => openStore(dir, { url, owner })));
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  // The first server is silent (no heartbeat); the others are alive, so the one that takes the claim over keeps it.
  for (const s of stores.slice(1)) await s.fleet.startHeartbeat(60_000);
  const { account } = await stores[0].keys.create({});
  const ref = { accountId: account, endpoint: 'remove', key: 'race' };
  t.same(await stores[0].idempotency.claim(ref, 'fp', 3600), { state: 'claimed' });
  const claims = await Promise.all(stores.slice(1).map((s) => s.idempotency.claim(ref, 'fp', 3600)));
  t.equal(claims.filter((c) => c.state === 'claimed').length, 1, 'exactly one server takes it over');
  t.same(claims.filter((c) => c.state !== 'claimed').map((c) => c.state), ['pending', 'pending', 'pending', 'pending', 'pending']);
});

t.test('[postgres] PostgreSQL dropping a connection inside a transaction or an advisory lock: the call fails, the process lives on', async (t) => {
  const { store } = await openTestStore(t, 'postgres');
  const db = store.db as PostgresDb;
  const killer = await openTestStore(t, 'postgres');
  // pg_terminate_backend is what a restart or a failover does to each connection.
  const dropped = async (q: { get: Store['db']['get'] }) => {
    const { pid } = (await q.get<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!;
    await killer.store.db.get('SELECT pg_terminate_backend(?)', [pid]);
    // Idle in the transaction while the server's goodbye arrives: the client emits 'error' then.
    await new Promise((r) => setTimeout(r, 300));
    await q.get('SELECT 1');
  };
  await t.rejects(db.transaction(dropped), 'the transaction rejects');
  await t.rejects(db.withAdvisoryLock(4242, dropped), 'so does the advisory lock');
  t.same(await db.get('SELECT 1 AS one'), { one: 1 }, 'the pool gave the broken clients up and serves new ones');
  t.same(await db.transaction((tx) => tx.get('SELECT 2 AS two')), { two: 2 });
});

t.test('[postgres] migrations: versioned, a no-op on reopen, safe when several servers start at once', async (t) => {
  const dir = await tempDir(t);
  const url = (await storeUrl('postgres'))!;
  const stores = await Promise.all([openStore(dir, { url }), openStore(dir, { url }), openStore(dir, { url })]);
  t.teardown(() => Promise.all(stores.map((s) => s.close())));
  t.equal(stores[0].kind, 'postgres');
  const versions = await stores[0].db.all<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
  t.same(versions.map((v) => v.version), PG_MIGRATIONS.map((_, i) => i + 1), 'each migration applied exactly once');
  const { key, account } = await stores[1].keys.create({});
  t.equal((await stores[2].keys.authenticate(key))?.accountId, account, 'one database behind every store');
  await stores[0].db.run('INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)', [PG_MIGRATIONS.length + 1]);
  await t.rejects(openStore(dir, { url }), /newer than this cutout/);
  await t.rejects(openStore(dir, { url: url.replace(/\/[^/]+$/, '/no_such_db') }), /Cannot open the store postgres:\/\/postgres:\*\*\*@/, 'the password is not shown');
});

forEachEngine('rate limit: one sliding window per key across servers, refused requests not counted', async (t, kind) => {
  // SQLite's clock is this process's (the test moves it); PostgreSQL's is the database's own, so
  // there the window is short and real time slides it.
  const clock = { now: Date.UTC(2025, 5, 15, 12) };
  const { store, dir, url } = await openTestStore(t, kind, { now: () => clock.now });
  const other = await openStore(dir, { url, now: () => clock.now });
  t.teardown(() => other.close());
  const windowMs = kind === 'postgres' ? 3_000 : 60_000;
  const pass = async (ms: number) => {
    if (kind === 'postgres') await new Promise((resolve) => setTimeout(resolve, ms));
    else clock.now += ms;
  };
  const started = Date.now();
  const decisions = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? other : store).rateLimits.hit('key:a', 5, windowMs)));
  t.equal(decisions.filter((d) => d.allowed).length, 5, 'exactly the limit allowed, whichever server counted');
  const refused = decisions.find((d) => !d.allowed)!;
  t.same([refused.remaining, refused.limit, refused.retryAfter], [0, 5, windowMs / 1000]);
  if (kind === 'sqlite') t.equal(refused.reset, Math.ceil((clock.now + windowMs) / 1000));
  else t.ok(Math.abs(refused.reset - (started + windowMs) / 1000) < 3, `reset by the database's clock (${refused.reset})`);
  t.ok((await store.rateLimits.hit('key:b', 5, windowMs)).allowed, 'another key has its own window');
  await pass(windowMs / 2);
  t.notOk((await other.rateLimits.hit('key:a', 5, windowMs)).allowed);
  await pass(windowMs / 2 + 50);
  const after = await store.rateLimits.hit('key:a', 5, windowMs);
  t.same([after.allowed, after.remaining], [true, 4], 'the window slid: the old requests left it');
  await pass(windowMs + 50);
  t.equal(await store.rateLimits.purge(windowMs), 2);
});

t.test('rate limit on PostgreSQL: a server whose clock is 90 s ahead neither grants nor refuses extra requests', async (t) => {
  const { store, dir, url } = await openTestStore(t, 'postgres');
  const ahead = await openStore(dir, { url, now: () => Date.now() + 90_000 });
  t.teardown(() => ahead.close());
  const decisions: boolean[] = [];
  for (let i = 0; i < 8; i++) decisions.push((await (i % 2 ? ahead : store).rateLimits.hit('key:skew', 4, 60_000)).allowed);
  t.same(decisions, [true, true, true, true, false, false, false, false], 'exactly 4, spread over both servers');
  const fromAhead = await ahead.rateLimits.hit('key:skew', 4, 60_000);
  t.ok(fromAhead.retryAfter > 0 && fromAhead.retryAfter <= 60, `Retry-After by the database's clock (${fromAhead.retryAfter} s), not 90 s off`);
});

/** `db` with every statement and transaction it is asked for counted (the store's side of the seam). */
function countingDb(db: Store['db']): { db: Store['db']; counts: { statements: number; transactions: number } } {
  const counts = { statements: 0, transactions: 0 };
  const counted = Object.create(db) as Store['db'];
  for (const method of ['get', 'all', 'run'] as const) {
    (counted as any)[method] = (...args: unknown[]) => {
      counts.statements++;
      return (db as any)[method](...args);
    };
  }
  counted.transaction = (fn) => {
    counts.transactions++;
    return db.transaction(fn);
  };
  return { db: counted, counts };
}

forEachEngine('rate limit: one statement per request, no transaction; a lowered limit holds at once', async (t, kind) => {
  const { store, dir } = await openTestStore(t, kind);
  const { db, counts } = countingDb(store.db);
  const counted = new Store(db, dir);
  const decisions = [];
  for (let i = 0; i < 4; i++) decisions.push(await counted.rateLimits.hit('key:one', 3, 60_000));
  t.same(decisions.map((d) => [d.allowed, d.remaining]), [[true, 2], [true, 1], [true, 0], [false, 0]]);
  t.same(counts, { statements: 4, transactions: 0 }, 'each check is one statement, outside any transaction');
  const { hits } = (await store.db.get<{ hits: unknown }>('SELECT hits FROM rate_windows WHERE rate_key = ?', ['key:one']))!;
  const log = (typeof hits === 'string' ? JSON.parse(hits) as unknown[] : hits as unknown[]).map(Number);
  t.equal(log.length, 3, 'the refused request is not logged');
  t.same([...log].sort((a, b) => a - b), log, 'the log is in order');
  const lowered = await counted.rateLimits.hit('key:one', 2, 60_000);
  t.same([lowered.allowed, lowered.remaining, lowered.limit], [false, 0, 2], 'three in the window: a limit of 2 refuses');
  const raised = await counted.rateLimits.hit('key:one', 5, 60_000);
  t.same([raised.allowed, raised.remaining], [true, 1], 'a limit of 5 admits the fourth');
});

/** A statement on a database of an older schema, in its engine's own client (`?` on SQLite, `$1` on PostgreSQL). */
type OldRun = (sql: string, params?: unknown[]) => Promise<unknown>;

/**
 * A database as an older cutout left it: `kind`'s migrations up to `version` only, recorded as
 * applied, then `fill` run on it through the engine's own client with that schema's SQL. Returns
 * the PostgreSQL URL to open it with (null for SQLite, whose file is in `dir`).
 */
async function databaseAt(kind: StoreKind, dir: string, version: number, fill: (run: OldRun) => Promise<void>): Promise<string | null> {
  const { splitStatements } = await import('../src/store/split.js');
  if (kind === 'sqlite') {
    const { default: sqlite3 } = await import('sqlite3');
    const old = new sqlite3.Database(path.join(dir, 'cutout.db'));
    const run: OldRun = (sql, params = []) => new Promise<void>((resolve, reject) => old.run(sql, params, (err) => (err ? reject(err) : resolve())));
    try {
      for (const script of MIGRATIONS.slice(0, version)) for (const statement of splitStatements(script)) await run(statement);
      await run(`PRAGMA user_version = ${version}`);
      await fill(run);
    } finally {
      await new Promise<void>((resolve) => old.close(() => resolve()));
    }
    return null;
  }
  const url = (await storeUrl('postgres'))!;
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const script of PG_MIGRATIONS.slice(0, version)) for (const statement of splitStatements(script)) await client.query(statement);
    await client.query('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)');
    await client.query('INSERT INTO schema_migrations (version, applied_at) SELECT v, 0 FROM generate_series(1, $1::int) AS v', [version]);
    await fill((sql, params) => client.query(sql, params));
  } finally {
    await client.end();
  }
  return url;
}

t.test('an old SQLite database (schema 7, the rate limit\'s three statements) migrates with its open windows kept', async (t) => {
  const dir = await tempDir(t);
  const clock = { now: Date.UTC(2025, 5, 15, 12) };
  // A window as the three-statement code left it: two requests in the last minute.
  await databaseAt('sqlite', dir, 7, async (run) => {
    await run('INSERT INTO rate_windows (rate_key, hits, updated_at) VALUES (?, ?, ?)', ['key:old', JSON.stringify([clock.now - 20_000, clock.now - 10_000]), clock.now - 10_000]);
  });
  const store = await openStore(dir, { now: () => clock.now });
  t.teardown(() => store.close());
  t.equal((await store.db.get<{ user_version: number }>('PRAGMA user_version'))?.user_version, MIGRATIONS.length);
  const third = await store.rateLimits.hit('key:old', 3, 60_000);
  t.same([third.allowed, third.remaining], [true, 0], 'the two old requests still count');
  const fourth = await store.rateLimits.hit('key:old', 3, 60_000);
  t.same([fourth.allowed, fourth.retryAfter], [false, 40], 'refused until the oldest old request leaves');
});

t.test('an old PostgreSQL database (schema 5, the log as JSON text) migrates with its open windows kept', async (t) => {
  const dir = await tempDir(t);
  // Windows as the three-statement code left them, stamped by the database's clock.
  const url = await databaseAt('postgres', dir, 5, async (run) => {
    await run(`INSERT INTO rate_windows (rate_key, hits, updated_at) SELECT 'key:old', '[' || (n - 20000) || ',' || (n - 10000) || ']', n - 10000 FROM (SELECT ${POSTGRES_NOW_MS} AS n) s`);
    await run(`INSERT INTO rate_windows (rate_key, hits, updated_at) VALUES ('key:empty', '[]', 0)`);
  });
  const store = await openStore(dir, { url: url! });
  t.teardown(() => store.close());
  const versions = await store.db.all<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
  t.equal(versions.length, PG_MIGRATIONS.length, 'migrated to the last version');
  const third = await store.rateLimits.hit('key:old', 3, 60_000);
  t.same([third.allowed, third.remaining], [true, 0], 'the two old requests still count');
  const fourth = await store.rateLimits.hit('key:old', 3, 60_000);
  t.ok(!fourth.allowed && fourth.retryAfter >= 39 && fourth.retryAfter <= 41, `refused until the oldest old request leaves (${fourth.retryAfter} s)`);
  t.same((await store.rateLimits.hit('key:empty', 3, 60_000)).remaining, 2, 'an empty log reads as an empty array');
});

function newJob(accountId: string, extra: Partial<NewJob> = {}): NewJob {
  return {
    id: crypto.randomUUID(), accountId, keyId: null, options: { size: 'preview' } as NewJob['options'], sourceKind: 'image_file', sourceUrl: null,
    input: Buffer.from('image bytes'), inputDesc: 'upload', callbackUrl: null, billable: true, batchId: null, ...extra,
  };
}

forEachEngine('jobs: claimed by two servers at once, each job exactly once, in order', async (t, kind) => {
  const { store, dir, url } = await openTestStore(t, kind);
  const other = await openStore(dir, { url });
  t.teardown(() => other.close());
  const { account } = await store.keys.create({});
  const jobs = Array.from({ length: 30 }, () => newJob(account));
  t.same(await store.jobs.create(jobs, 100), { created: true, queued: 30 });
  const claimed: string[] = [];
  await Promise.all([store, other, store, other].map(async (s) => {
    for (;;) {
      const job = await s.jobs.claimNext(60_000);
      if (!job) return;
      claimed.push(job.id);
      t.equal(job.attempts, 1);
      t.ok((await s.jobs.readInput(job.id))?.equals(Buffer.from('image bytes')), 'its input is readable');
    }
  }));
  t.equal(claimed.length, 30, 'every job claimed');
  t.equal(new Set(claimed).size, 30, 'none claimed twice');
  t.same(await store.jobs.counts(), { queued: 0, processing: 30 });
});

forEachEngine('jobs: a refused or failed submission stores no input', async (t, kind) => {
  const { store, dir } = await openTestStore(t, kind);
  const { account } = await store.keys.create({});
  t.same(await store.jobs.create([newJob(account), newJob(account)], 1), { created: false, queued: 0 });
  await t.rejects(store.jobs.create([newJob(account)], 10, async () => { throw new Error('seal failed'); }), /seal failed/);
  t.same(await fs.readdir(path.join(dir, 'jobs')).catch(() => []), []);
  t.equal((await store.db.all('SELECT 1 FROM jobs')).length, 0);
});

forEachEngine('jobs: a lease run out moves the job to another server; the late run cannot finish it or charge it', async (t, kind) => {
  const clock = { now: Date.UTC(2025, 5, 15, 12) };
  const { store: dead, dir, url } = await openTestStore(t, kind, { now: () => clock.now });
  const live = await openStore(dir, { url, now: () => clock.now });
  t.teardown(() => live.close());
  const { account } = await dead.keys.create({});
  const job = newJob(account, { callbackUrl: 'http://example.test/hook' });
  await dead.jobs.create([job], 10);
  const first = (await dead.jobs.claimNext(1000))!;
  // The owner is this process in both stores, so only the lease tells them apart here.
  t.same(await live.jobs.reclaimAbandoned(3, [job.id]), { requeued: 0, exhausted: [] }, 'a job running here is never taken from itself');
  await elapse(live, clock, 1001);
  t.same((await live.jobs.reclaimAbandoned(3)).requeued, 1, 'the lease ran out: back to the queue');
  const second = (await live.jobs.claimNext(1000))!;
  t.equal(second.attempts, 2, 'the interrupted attempt is counted');
  t.equal(await dead.jobs.renewLease(job.id, first.attempts, 1000), false, 'the first claim is lost');
  const charge = (s: Store, attempt: number) => s.ledger.recordRun(
    { id: job.id, accountId: account, keyId: null, channel: 'job', input: 'upload', size: 'full', credits: 1, ms: 5, result: { data: Buffer.from([attempt]), ext: 'png', name: `${job.id}.${attempt}`, contentType: 'image/png', width: 1, height: 1 } },
    { within: async (tx, outcome) => { if (!(await s.jobs.markDoneIn(tx, job.id, attempt, outcome, { url: job.callbackUrl!, body: '{}' }))) throw new Error('claim lost'); } },
  );
  await t.rejects(charge(dead, first.attempts), /claim lost/, 'the late first run commits nothing');
  t.equal(await dead.ledger.balance(account), 10);
  await charge(live, second.attempts);
  await t.rejects(charge(live, second.attempts), /claim lost|UNIQUE|duplicate key/, 'a repeat of the commit charges nothing');
  t.equal(await live.ledger.balance(account), 9, 'charged exactly once');
  t.same((await live.results.get(job.id, 3600))?.data, Buffer.from([2]), 'the committed attempt\'s result');
  t.equal((await live.jobs.getById(job.id))?.status, 'done');
  t.equal((await live.deliveries.of(job.id)).length, 1, 'one callback delivery');
});

t.test('[postgres] jobs queued through one server wake the others at once (LISTEN/NOTIFY), also after a hand-back', async (t) => {
  const { store: a, dir, url } = await openTestStore(t, 'postgres');
  const b = await openStore(dir, { url });
  t.teardown(() => b.close());
  let wakeups = 0;
  let woken: () => void = () => undefined;
  await b.jobs.onQueued(() => { wakeups++; woken(); });
  const next = () => new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no notification within 5 s')), 5000);
    woken = () => { clearTimeout(timer); resolve(); };
  });
  const { account } = await a.keys.create({});
  const job = newJob(account);
  let heard = next();
  await a.jobs.create([job], 10);
  await heard;
  t.equal(wakeups, 1, 'one notification for the created jobs');
  heard = next();
  const claim = (await b.jobs.claimNext(60_000))!;
  t.equal(await b.jobs.requeue([{ id: job.id, attempt: claim.attempts }]), 1);
  await heard;
  t.equal(wakeups, 2, 'and one when a claim is handed back');
  t.same(await a.jobs.create([newJob(account), newJob(account)], 2), { created: false, queued: 1 });
  await new Promise((r) => setTimeout(r, 300));
  t.equal(wakeups, 2, 'a refused submission wakes nobody');
});

forEachEngine('jobs: claims handed back for an inference outage never count towards the attempts that fail a job', async (t, kind) => {
  const clock = { now: Date.UTC(2025, 5, 15, 12) };
  const { store } = await openTestStore(t, kind, { now: () => clock.now });
  const { account } = await store.keys.create({});
  const job = newJob(account);
  await store.jobs.create([job], 10);
  for (let i = 0; i < 4; i++) {
    const claim = (await store.jobs.claimNext(1000))!;
    t.equal(await store.jobs.requeueAfterOutage({ id: job.id, attempt: claim.attempts }), true, `outage ${i + 1}: back in the queue`);
  }
  t.equal(await store.jobs.requeueAfterOutage({ id: job.id, attempt: 4 }), false, 'a claim no longer held is not handed back again');
  const row = (await store.jobs.getById(job.id))!;
  t.same([row.status, row.attempts, row.outages], ['queued', 4, 4]);
  // Now a real interruption: the claim's server goes silent and its lease runs out.
  await store.jobs.claimNext(1000);
  await elapse(store, clock, 1001);
  t.same(await store.jobs.reclaimAbandoned(2), { requeued: 1, exhausted: [] }, 'one interruption after four outages is not two');
  await store.jobs.claimNext(1000);
  await elapse(store, clock, 1001);
  const second = await store.jobs.reclaimAbandoned(2);
  t.same([second.requeued, second.exhausted.map((j) => j.id)], [0, [job.id]], 'the second interruption is: handed over to fail');
});

forEachEngine('jobs: a job interrupted maxAttempts times is handed over to fail, once', async (t, kind) => {
  const clock = { now: Date.UTC(2025, 5, 15, 12) };
  const { store, dir, url } = await openTestStore(t, kind, { now: () => clock.now });
  const other = await openStore(dir, { url, now: () => clock.now });
  t.teardown(() => other.close());
  const { account } = await store.keys.create({});
  const job = newJob(account);
  await store.jobs.create([job], 10);
  for (let i = 0; i < 2; i++) {
    await store.jobs.claimNext(1000);
    await elapse(store, clock, 1001);
    await store.jobs.reclaimAbandoned(2);
  }
  const { exhausted } = await other.jobs.reclaimAbandoned(2);
  t.same(exhausted.map((j) => [j.id, j.attempts]), [[job.id, 2]]);
  const adopted = await Promise.all([store.jobs.adoptAbandoned(exhausted[0], 1000), other.jobs.adoptAbandoned(exhausted[0], 1000)]);
  t.same(adopted.filter(Boolean).length, 1, 'exactly one server adopts it');
  t.equal(await store.jobs.fail(job.id, 2, { code: 'processing_failed', message: 'x' }, null), true);
  t.equal((await store.jobs.getById(job.id))?.status, 'failed');
});

forEachEngine('callback deliveries: each attempt claimed by exactly one server; a lost claim records nothing', async (t, kind) => {
  const clock = { now: Date.UTC(2025, 5, 15, 12) };
  const { store, dir, url } = await openTestStore(t, kind, { now: () => clock.now });
  const other = await openStore(dir, { url, now: () => clock.now, owner: twoIdentities()[1] });
  t.teardown(() => other.close());
  const { account } = await store.keys.create({});
  const jobs = Array.from({ length: 6 }, () => newJob(account, { callbackUrl: 'http://example.test/hook' }));
  await store.jobs.create(jobs, 10);
  for (const j of jobs) {
    const c = (await store.jobs.claimNext(60_000))!;
    await store.jobs.fail(c.id, c.attempts, { code: 'processing_failed', message: 'x' }, { url: j.callbackUrl!, body: '{}' });
  }
  const [a, b] = await Promise.all([store.deliveries.claimDue(4, 1000), other.deliveries.claimDue(4, 1000)]);
  t.equal(a.length + b.length, 6);
  t.equal(new Set([...a, ...b].map((d) => d.id)).size, 6, 'no delivery claimed twice');
  t.same(await store.deliveries.claimDue(10, 1000), [], 'nothing left to claim while the leases run');
  t.equal(await store.deliveries.recordAttempt(a[0].id, { state: 'delivered', attempts: 1 }), true);
  await elapse(store, clock, 1001);
  const retaken = await other.deliveries.claimDue(10, 1000);
  t.equal(retaken.length, 5, 'leases run out: the undelivered ones are claimed again');
  if (kind === 'sqlite') t.equal(await other.deliveries.nextAt(), clock.now + 1000);
  else {
    // The leases end by the database's clock (clock.ts), not the test's.
    const dbNow = Number((await store.db.get<{ now: number }>(`SELECT ${POSTGRES_NOW_MS} AS now`))!.now);
    t.ok(Math.abs((await other.deliveries.nextAt())! - (dbNow + 1000)) < 2_000, 'the next one is due when the leases end');
  }
  // The first server's late outcome for a delivery the other now holds: refused, nothing written.
  const lost = a[1];
  t.ok(retaken.some((d) => d.id === lost.id), 'the other server holds it now');
  const before = await store.deliveries.of(lost.jobId);
  t.equal(await store.deliveries.recordAttempt(lost.id, { state: 'delivered', attempts: 1 }), false, 'the lost claim records nothing');
  t.equal(await store.deliveries.recordAttempt(lost.id, { state: 'retry', attempts: 1, nextAttemptAt: clock.now, lastError: 'late' }), false);
  t.same(await store.deliveries.of(lost.jobId), before, 'the delivery is as it was');
  t.equal(await other.deliveries.recordAttempt(lost.id, { state: 'delivered', attempts: 1 }), true, 'its holder records the attempt');
});

t.test('[postgres] a server whose clock is far off takes no live work: leases, heartbeats and claims go by the database clock', async (t) => {
  const { store: honest, dir, url } = await openTestStore(t, 'postgres');
  const [idA, idB] = twoIdentities();
  const TEN_MINUTES = 600_000;
  // Two servers of the fleet whose clocks are ten minutes ahead and behind.
  const ahead = await openStore(dir, { url, owner: idA, now: () => Date.now() + TEN_MINUTES });
  const behind = await openStore(dir, { url, owner: idB, now: () => Date.now() - TEN_MINUTES });
  t.teardown(() => Promise.all([ahead.close(), behind.close()]));
  const { account } = await honest.keys.create({});
  const job = newJob(account);
  await honest.jobs.create([job], 10);
  const claim = (await honest.jobs.claimNext(60_000))!;
  const dbNow = Number((await honest.db.get<{ now: number }>(`SELECT ${POSTGRES_NOW_MS} AS now`))!.now);
  t.ok(Math.abs(claim.leaseUntil! - (dbNow + 60_000)) < 5_000, 'the lease ends a lease after the database\'s now');

  t.same(await ahead.jobs.reclaimAbandoned(3), { requeued: 0, exhausted: [] }, 'a clock ten minutes ahead does not see the live lease as run out');
  t.equal(await ahead.jobs.claimNext(60_000), null, 'and has nothing to claim');
  t.equal(await behind.jobs.renewLease(job.id, claim.attempts, 60_000), false, 'another server cannot renew it');
  t.equal(await honest.jobs.renewLease(job.id, claim.attempts, 60_000), true, 'its holder can');
  t.equal((await honest.jobs.getById(job.id))?.leaseOwner, claim.leaseOwner, 'the job stays with its holder');

  // A heartbeat written by a clock ten minutes behind is still a live heartbeat to the others.
  await behind.fleet.startHeartbeat(60_000);
  const ref = { accountId: account, endpoint: 'remove', key: 'skew' };
  t.same(await behind.idempotency.claim(ref, 'fp', 3600), { state: 'claimed' });
  t.same(await ahead.idempotency.claim(ref, 'fp', 3600), { state: 'pending' }, 'its claim is not taken over: its server is alive');
  const pending = (await ahead.idempotency.pending(ref))!;
  t.ok(pending.ownerAlive, 'alive by its heartbeat');
  t.ok(pending.ageMs >= 0 && pending.ageMs < 5_000, `the claim is as young as it is (${pending.ageMs} ms), whatever either clock says`);
  t.same((await ahead.fleet.list()).map((s) => [s.id, s.alive]), [[idB, true]], 'listed alive');

  // A callback attempt being made by one server is not taken by a server whose clock is ahead.
  t.equal(await honest.jobs.fail(job.id, claim.attempts, { code: 'processing_failed', message: 'x' }, { url: 'http://example.test/hook', body: '{}' }), true);
  t.equal((await honest.deliveries.claimDue(10, 60_000)).length, 1, 'the attempt is claimed for a minute');
  t.same(await ahead.deliveries.claimDue(10, 60_000), [], 'a clock ten minutes ahead does not see that lease as run out');
});

forEachEngine('schema room: a run may charge any whole number of credits on any channel (migrations 7 and pg 5)', async (t, kind) => {
  const { store } = await openTestStore(t, kind);
  const { account } = await store.keys.create({ name: 'room' });
  const insert = (credits: number, channel: string) => store.db.run(
    'INSERT INTO runs (id, account_id, key_id, channel, input, size, credits, ms, created_at) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?)',
    [crypto.randomUUID(), account, channel, 'upload', 'full', credits, 5, Date.now()],
  );
  await insert(2, 'photoroom');
  t.equal((await store.ledger.usage(account)).reduce((sum, d) => sum + d.credits, 0), 2, 'a charge of 2 credits counts in usage');
  await t.rejects(insert(-1, 'api'), 'a negative charge is still refused');
});

t.test('an old SQLite database (schema 6, runs pinned to 0/1 credits) migrates with its runs kept', async (t) => {
  const dir = await tempDir(t);
  await databaseAt('sqlite', dir, 6, async (run) => {
    await run("INSERT INTO runs (id, account_id, key_id, channel, input, size, credits, ms, created_at) VALUES ('r1', NULL, NULL, 'cli', 'a.jpg', 'full', 0, 10, 1)");
    await t.rejects(run("INSERT INTO runs (id, account_id, key_id, channel, input, size, credits, ms, created_at) VALUES ('r2', NULL, NULL, 'photoroom', 'x', 'full', 2, 10, 1)"), 'schema 6 pins them');
  });
  const store = await openStore(dir);
  t.teardown(() => store.close());
  t.equal((await store.db.get<{ user_version: number }>('PRAGMA user_version'))?.user_version, MIGRATIONS.length);
  t.same(await store.db.get('SELECT id, channel, credits FROM runs'), { id: 'r1', channel: 'cli', credits: 0 }, 'the old run is kept');
  await store.db.run("INSERT INTO runs (id, account_id, key_id, channel, input, size, credits, ms, created_at) VALUES ('r2', NULL, NULL, 'photoroom', 'x', 'full', 2, 10, 1)");
  t.equal((await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM runs'))?.n, 2, 'and the new shape is taken');
});

/** The index of the migration that gives results their `result_fields` (SQLite 9, PostgreSQL 7): the versions before it. */
const beforeResultFields = (list: readonly string[]) => list.findIndex((m) => m.includes('ALTER TABLE results ADD COLUMN result_fields'));

/**
 * A database made by the migrations before results kept their fields (SQLite 8, PostgreSQL 6),
 * holding the rows those versions wrote, through the old schema's own SQL: the same text on both engines.
 */
async function oldDatabase(kind: StoreKind, dir: string): Promise<string | null> {
  const created = Date.now();
  const rows = [
    "INSERT INTO accounts (id, created_at) VALUES ('acct-old', 1)",
    `INSERT INTO jobs (id, account_id, status, params, credits_charged, credits_remaining, created_at, updated_at, finished_at, result_fields)
      VALUES ('job-old', 'acct-old', 'done', '{"size":"full","format":"png","v":2}', 1, 9, ${created}, ${created}, ${created}, '{"confidence":0.5}')`,
    `INSERT INTO results (job_id, path, content_type, width, height, created_at) VALUES ('job-old', 'old/job-old.png', 'image/png', 4, 3, ${created})`,
  ];
  const version = beforeResultFields(kind === 'sqlite' ? MIGRATIONS : PG_MIGRATIONS);
  return databaseAt(kind, dir, version, async (run) => {
    for (const sql of rows) await run(sql);
  });
}

forEachEngine('an old database (SQLite 8, PostgreSQL 6) migrates; its results and jobs read back, new ones keep every field (migrations 9 and pg 7)', async (t, kind) => {
  t.same([beforeResultFields(MIGRATIONS), beforeResultFields(PG_MIGRATIONS)], [8, 6], 'the versions before results kept their fields');
  const dir = await tempDir(t);
  const url = await oldDatabase(kind, dir);
  const store = await openStore(dir, { url });
  t.teardown(() => store.close());
  const version = kind === 'sqlite'
    ? (await store.db.get<{ user_version: number }>('PRAGMA user_version'))?.user_version
    : (await store.db.get<{ version: number }>('SELECT MAX(version) AS version FROM schema_migrations'))?.version;
  t.equal(version, kind === 'sqlite' ? MIGRATIONS.length : PG_MIGRATIONS.length, 'migrated to the last version');

  t.match(await store.results.find('job-old', 3600), { jobId: 'job-old', width: 4, height: 3, fields: null }, 'an old result: its row as it was, no fields');
  t.same((await store.jobs.get('job-old', 'acct-old'))?.resultFields, { confidence: 0.5 }, 'an old job: the fields it kept');

  const fields = { width: 4, height: 3, foregroundTop: 0, foregroundLeft: 1, foregroundWidth: 2, foregroundHeight: 3, confidence: 0.75, processingMs: 12 };
  const { account } = await store.keys.create({ name: 'new' });
  const id = crypto.randomUUID();
  await store.ledger.recordRun(run(account, 1, { id, result: { data: Buffer.from('png!'), ext: 'png', contentType: 'image/png', width: 4, height: 3, fields } }));
  t.same((await store.results.find(id, 3600))?.fields, fields, 'a new result keeps every field in its column');
  const stored = await store.results.get(id, 3600);
  t.same([stored?.data.toString(), stored?.fields], ['png!', fields], 'and reads it back with its bytes');
});
