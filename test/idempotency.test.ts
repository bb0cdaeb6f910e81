import t from 'tap';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { openStore, type StoreKind } from '../src/store/db.js';
import { Idempotency, type Caller } from '../src/server/guards.js';
import { forEachEngine, openTestStore } from './helpers/stores.js';

/** A fresh store of `kind` with one account, removed after the test. */
async function storeWithAccount(t: Tap.Test | any, kind: StoreKind) {
  const { store, url } = await openTestStore(t, kind);
  const { account } = await store.keys.create({});
  const caller: Caller = { accountId: account, keyId: null, test: false, channel: 'key', rateKey: 'k' };
  return { store, account, caller, url };
}

/**
 * Two server processes on one data directory: two stores (two SQLite connections) on the same
 * file, each with its own Idempotency. A repeat on the second while the first runs must wait and
 * replay, never run the work twice nor answer a status api-spec part 7 does not list.
 */
forEachEngine('a repeat in another process waits for the first request, then replays it', async (t, kind) => {
  const { store: first, dir, url } = await openTestStore(t, kind);
  const second = await openStore(dir, { url });
  t.teardown(async () => { await second.close(); });
  const { account } = await first.keys.create({});
  const caller: Caller = { accountId: account, keyId: null, test: false, channel: 'key', rateKey: 'k' };

  let runs = 0;
  let finish!: () => void;
  const gate = new Promise<void>((resolve) => { finish = resolve; });
  const a = new Idempotency(first, 3600, 45_000);
  const b = new Idempotency(second, 3600, 45_000);
  const one = a.run(caller, 'remove', 'order-1', 'fp', async () => { runs++; await gate; return { id: 'job-1' }; });
  await new Promise((resolve) => setTimeout(resolve, 50)); // the first has claimed the key
  let settled = false;
  const two = b.run(caller, 'remove', 'order-1', 'fp', async () => { runs++; return { id: 'job-2' }; }).finally(() => { settled = true; });
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.equal(settled, false, 'the repeat is still waiting while the first runs');
  finish();
  t.same(await one, { value: { id: 'job-1' }, replayed: false });
  t.same(await two, { value: { id: 'job-1' }, replayed: true }, 'the repeat replays the first result');
  t.equal(runs, 1, 'the work ran once');
});

forEachEngine('a claim older than the longest request is taken over (its server stopped mid-request)', async (t, kind) => {
  const { store, account, caller } = await storeWithAccount(t, kind);
  // A pending claim with nobody in this process running it, as a killed server leaves.
  await store.idempotency.claim({ accountId: account, endpoint: 'jobs', key: 'order-2' }, 'fp', 3600);
  const started = Date.now();
  const result = await new Idempotency(store, 3600, 300).run(caller, 'jobs', 'order-2', 'fp', async () => ({ id: 'job-3' }));
  t.same(result, { value: { id: 'job-3' }, replayed: false });
  t.ok(Date.now() - started >= 300, 'only after the longest a request can hold a key');
});

/** The pid of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '0']);
  return child.pid as number;
}

/** The identity of a server of this host that has exited (and, for PostgreSQL, has no heartbeat). */
function deadServer(): { owner: string; pid: number } {
  const pid = deadPid();
  return { owner: `${os.hostname()}:${pid}:${Date.now() - 60_000}:dead00`, pid };
}

forEachEngine('a claim whose process died is taken over at once; a live one is not', async (t, kind) => {
  const { store, account, caller } = await storeWithAccount(t, kind);
  const ref = { accountId: account, endpoint: 'remove', key: 'order-4' };
  await store.idempotency.claim(ref, 'fp', 3600);
  const dead = deadServer();
  await store.db.run('UPDATE idempotency_keys SET owner_pid = ?, owner = ? WHERE key = ?', [dead.pid, dead.owner, 'order-4']);
  t.same(await store.idempotency.pending(ref).then((p) => p?.ownerAlive), false);
  const started = Date.now();
  const result = await new Idempotency(store, 3600, 60_000).run(caller, 'remove', 'order-4', 'fp', async () => ({ id: 'job-4' }));
  t.same(result, { value: { id: 'job-4' }, replayed: false });
  t.ok(Date.now() - started < 5_000, 'without waiting for the 60 s limit');

  // The same key claimed by a process that runs (this one): a repeat still waits for it.
  await store.idempotency.claim({ ...ref, key: 'order-5' }, 'fp', 3600);
  t.same(await store.idempotency.pending({ ...ref, key: 'order-5' }).then((p) => p?.ownerAlive), true);
  t.same(await store.idempotency.claim({ ...ref, key: 'order-5' }, 'fp', 3600), { state: 'pending' });
});

forEachEngine('server start drops the claims of dead processes and keeps those of live ones', async (t, kind) => {
  const { store, account } = await storeWithAccount(t, kind);
  for (const key of ['live', 'dead', 'old']) await store.idempotency.claim({ accountId: account, endpoint: 'jobs', key }, 'fp', 3600);
  const dead = deadServer();
  await store.db.run('UPDATE idempotency_keys SET owner_pid = ?, owner = ? WHERE key = ?', [dead.pid, dead.owner, 'dead']);
  await store.db.run('UPDATE idempotency_keys SET owner_pid = NULL, owner = NULL WHERE key = ?', ['old']); // made before owners were recorded
  await store.idempotency.reset(3600);
  const left = await store.db.all<{ key: string }>('SELECT key FROM idempotency_keys ORDER BY key');
  t.same(left.map((r) => r.key), ['live']);
});

forEachEngine('the key is done in the same commit as the charge: a crash right after it cannot charge twice', async (t, kind) => {
  const { store, account, caller, url } = await storeWithAccount(t, kind);
  const observer = await openStore(store.dataDir, { url }); // another connection, as a restarted server
  t.teardown(() => observer.close());
  let seenAfterCommit: unknown;
  const value = { id: 'run-6', credits_charged: 1 };
  await new Idempotency(store, 3600, 60_000).run(caller, 'remove', 'order-6', 'fp', async (seal) => {
    await store.ledger.recordRun(
      { id: 'run-6', accountId: account, keyId: null, channel: 'api', input: 'upload', size: 'full', credits: 1, ms: 1 },
      { within: (tx) => seal(tx, value) },
    );
    // A kill -9 here, after the charge's commit: the key must already replay that charge.
    seenAfterCommit = await observer.db.get("SELECT state, response FROM idempotency_keys WHERE key = 'order-6'");
    return value;
  });
  t.same(seenAfterCommit, { state: 'done', response: JSON.stringify(value) });
  t.equal(await observer.ledger.balance(account), 9, 'one charge');
});

t.test('[postgres] a claim of another server is kept while its heartbeat runs, taken over once it stops', async (t) => {
  const { store, account } = await storeWithAccount(t, 'postgres');
  const other = 'other-host:4242:1700000000000:abcdef';
  const ref = { accountId: account, endpoint: 'jobs', key: 'order-9' };
  await store.idempotency.claim(ref, 'fp', 3600);
  await store.db.run('UPDATE idempotency_keys SET owner = ?, owner_pid = 4242 WHERE key = ?', [other, 'order-9']);
  await store.db.run('INSERT INTO servers (id, host, pid, started_at, heartbeat_at, lease_ms) VALUES (?, ?, 4242, 0, ?, 1000)', [other, 'other-host', Date.now()]);
  t.same(await store.idempotency.claim(ref, 'fp', 3600), { state: 'pending' }, 'a live server keeps its claim');
  await store.db.run('UPDATE servers SET heartbeat_at = ? WHERE id = ?', [Date.now() - 1001, other]);
  t.same(await store.idempotency.pending(ref).then((p) => p?.ownerAlive), false);
  t.same(await store.idempotency.claim(ref, 'fp', 3600), { state: 'claimed' }, 'its heartbeat stopped: the claim is taken over');
});

forEachEngine('a slow server whose claim was taken over: its late charge rolls back and it replays the new owner\'s answer', async (t, kind) => {
  const { dir, url } = await openTestStore(t, kind);
  // Two server identities of this host, neither heartbeating: each looks gone to the other.
  const slow = await openStore(dir, { url, owner: `${os.hostname()}:${process.pid}:1:aaaaaa` });
  const other = await openStore(dir, { url, owner: `${os.hostname()}:${process.pid}:2:bbbbbb` });
  t.teardown(async () => { await slow.close(); await other.close(); });
  const { account } = await slow.keys.create({});
  const caller: Caller = { accountId: account, keyId: null, test: false, channel: 'key', rateKey: 'k' };
  const charge = (store: typeof slow, id: string) => async (seal: (tx: any, value: { id: string }) => Promise<void>) => {
    await store.ledger.recordRun(
      { id, accountId: account, keyId: null, channel: 'api', input: 'upload', size: 'full', credits: 1, ms: 1 },
      { within: (tx) => seal(tx, { id }) },
    );
    return { id };
  };
  let resume!: () => void;
  const paused = new Promise<void>((resolve) => { resume = resolve; });
  const a = new Idempotency(slow, 3600, 45_000);
  const b = new Idempotency(other, 3600, 45_000);
  const first = a.run(caller, 'remove', 'order-9', 'fp', async (seal) => { await paused; return charge(slow, 'run-a')(seal); });
  await new Promise((resolve) => setTimeout(resolve, 50)); // the slow server has claimed the key
  const second = await b.run(caller, 'remove', 'order-9', 'fp', charge(other, 'run-b'));
  t.same(second, { value: { id: 'run-b' }, replayed: false }, 'the other server took the silent claim over and ran');
  resume();
  t.same(await first, { value: { id: 'run-b' }, replayed: true }, 'the slow server answers with the new owner\'s result');
  t.equal(await slow.ledger.balance(account), 9, 'charged once');
  const charges = await slow.db.all<{ ref: string }>("SELECT ref FROM ledger WHERE reason = 'charge'");
  t.same(charges.map((c) => c.ref), ['run-b']);
});
