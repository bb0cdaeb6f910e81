import t from 'tap';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { openStore } from '../src/store/db.js';
import { Idempotency, type Caller } from '../src/server/guards.js';

/** A fresh data directory with one store and one account, removed after the test. */
async function storeWithAccount(t: Tap.Test | any) {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-idem-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const store = await openStore(dir);
  t.teardown(() => store.close());
  const { account } = await store.createKey({});
  const caller: Caller = { accountId: account, keyId: null, test: false, channel: 'key', rateKey: 'k' };
  return { store, account, caller };
}

/**
 * Two server processes on one data directory: two stores (two SQLite connections) on the same
 * file, each with its own Idempotency. A repeat on the second while the first runs must wait and
 * replay, never run the work twice nor answer a status api-spec part 7 does not list.
 */
t.test('a repeat in another process waits for the first request, then replays it', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-idem-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const first = await openStore(dir);
  const second = await openStore(dir);
  t.teardown(async () => { await first.close(); await second.close(); });
  const { account } = await first.createKey({});
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

t.test('a claim older than the longest request is taken over (its server stopped mid-request)', async (t) => {
  const { store, account, caller } = await storeWithAccount(t);
  // A pending claim with nobody in this process running it, as a killed server leaves.
  await store.claimIdempotencyKey({ accountId: account, endpoint: 'jobs', key: 'order-2' }, 'fp', 3600);
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

t.test('a claim whose process died is taken over at once; a live one is not', async (t) => {
  const { store, account, caller } = await storeWithAccount(t);
  const ref = { accountId: account, endpoint: 'remove', key: 'order-4' };
  await store.claimIdempotencyKey(ref, 'fp', 3600);
  await store.db.run('UPDATE idempotency_keys SET owner_pid = ? WHERE key = ?', [deadPid(), 'order-4']);
  t.same(await store.pendingIdempotencyClaim(ref).then((p) => p?.ownerAlive), false);
  const started = Date.now();
  const result = await new Idempotency(store, 3600, 60_000).run(caller, 'remove', 'order-4', 'fp', async () => ({ id: 'job-4' }));
  t.same(result, { value: { id: 'job-4' }, replayed: false });
  t.ok(Date.now() - started < 5_000, 'without waiting for the 60 s limit');

  // The same key claimed by a process that runs (this one): a repeat still waits for it.
  await store.claimIdempotencyKey({ ...ref, key: 'order-5' }, 'fp', 3600);
  t.same(await store.pendingIdempotencyClaim({ ...ref, key: 'order-5' }).then((p) => p?.ownerAlive), true);
  t.same(await store.claimIdempotencyKey({ ...ref, key: 'order-5' }, 'fp', 3600), { state: 'pending' });
});

t.test('server start drops the claims of dead processes and keeps those of live ones', async (t) => {
  const { store, account } = await storeWithAccount(t);
  for (const key of ['live', 'dead', 'old']) await store.claimIdempotencyKey({ accountId: account, endpoint: 'jobs', key }, 'fp', 3600);
  await store.db.run('UPDATE idempotency_keys SET owner_pid = ? WHERE key = ?', [deadPid(), 'dead']);
  await store.db.run('UPDATE idempotency_keys SET owner_pid = NULL WHERE key = ?', ['old']); // made before owners were recorded
  await store.resetIdempotencyKeys(3600);
  const left = await store.db.all<{ key: string }>('SELECT key FROM idempotency_keys ORDER BY key');
  t.same(left.map((r) => r.key), ['live']);
});

t.test('the key is done in the same commit as the charge: a crash right after it cannot charge twice', async (t) => {
  const { store, account, caller } = await storeWithAccount(t);
  const observer = await openStore(store.dataDir); // another connection, as a restarted server
  t.teardown(() => observer.close());
  let seenAfterCommit: unknown;
  const value = { id: 'run-6', credits_charged: 1 };
  await new Idempotency(store, 3600, 60_000).run(caller, 'remove', 'order-6', 'fp', async (seal) => {
    await store.recordRun(
      { id: 'run-6', accountId: account, keyId: null, channel: 'api', input: 'upload', size: 'full', credits: 1, ms: 1 },
      { within: (tx) => seal(tx, value) },
    );
    // A kill -9 here, after the charge's commit: the key must already replay that charge.
    seenAfterCommit = await observer.db.get("SELECT state, response FROM idempotency_keys WHERE key = 'order-6'");
    return value;
  });
  t.same(seenAfterCommit, { state: 'done', response: JSON.stringify(value) });
  t.equal(await observer.balance(account), 9, 'one charge');
});
