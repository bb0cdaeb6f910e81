/**
 * The queue without HTTP or a model: the backoff and delivery rules, the fair policy of the
 * shared pool, the job table (claims, leases, tokens, recovery, the queue limit) and the callback
 * secret.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { callbackBackoffMs, deliveryDecision, queueRetryAfterSeconds } from '../src/queue/backoff.js';
import { callbackSecretOf, signBody } from '../src/queue/secret.js';
import { chooseNext, WorkPool } from '../src/queue/pool.js';
import { openStore, type NewJob, type StoreKind } from '../src/store/db.js';
import { forEachEngine, openTestStore } from './helpers/stores.js';

t.test('callback backoff: the first delay, doubling', async (t) => {
  t.same([1, 2, 3].map((r) => callbackBackoffMs(r, 50)), [50, 100, 200]);
  t.same([1, 2, 3].map((r) => callbackBackoffMs(r, 2000)), [2000, 4000, 8000]);
  t.equal(callbackBackoffMs(30, 1000), 3_600_000, 'capped');
  t.throws(() => callbackBackoffMs(0, 50));
  t.throws(() => callbackBackoffMs(1, 0));
});

t.test('delivery decisions: 2xx ends, 5xx and network errors retry 3 times, other statuses end', async (t) => {
  const opts = { retries: 3, firstDelayMs: 50 };
  t.same(deliveryDecision(1, { status: 200 }, opts), { state: 'delivered' });
  t.same(deliveryDecision(4, { status: 204 }, opts), { state: 'delivered' });
  t.match(deliveryDecision(1, { status: 500 }, opts), { state: 'retry', delayMs: 50 });
  t.match(deliveryDecision(2, { status: 503 }, opts), { state: 'retry', delayMs: 100 });
  t.match(deliveryDecision(3, { networkError: 'ECONNREFUSED' }, opts), { state: 'retry', delayMs: 200, reason: 'ECONNREFUSED' });
  t.match(deliveryDecision(4, { status: 500 }, opts), { state: 'gave_up', reason: /after 4 attempts/ });
  t.match(deliveryDecision(1, { status: 404 }, opts), { state: 'gave_up', reason: /HTTP 404/ });
  t.match(deliveryDecision(1, { status: 301 }, opts), { state: 'gave_up' });
  // One try and three retries: count the attempts an always-failing receiver sees.
  let attempts = 0;
  for (;;) {
    attempts++;
    if (deliveryDecision(attempts, { status: 500 }, opts).state !== 'retry') break;
  }
  t.equal(attempts, 4);
});

t.test('Retry-After of a full queue', async (t) => {
  t.equal(queueRetryAfterSeconds(0, 1, 2000), 2);
  t.equal(queueRetryAfterSeconds(10, 2, 2000), 10);
  t.equal(queueRetryAfterSeconds(1, 4, 100), 1, 'at least 1 s');
  t.equal(queueRetryAfterSeconds(10_000, 1, 5000), 300, 'at most 5 min');
});

t.test('fair policy: sync first, but a job at least every syncBurst + 1 grants', async (t) => {
  t.same(chooseNext(1, 0, 5, 2), { kind: 'sync', streak: 5 });
  t.same(chooseNext(0, 1, 5, 2), { kind: 'job', streak: 0 });
  t.same(chooseNext(0, 0, 1, 2), { kind: null, streak: 1 });
  let streak = 0;
  const grants: string[] = [];
  for (let i = 0; i < 9; i++) {
    const next = chooseNext(10, 10, streak, 2);
    streak = next.streak;
    grants.push(next.kind!);
  }
  t.same(grants.join(','), 'sync,sync,job,sync,sync,job,sync,sync,job');
});

t.test('WorkPool: slots shared by sync and job tasks under the fair policy', async (t) => {
  const pool = new WorkPool(1);
  const order: string[] = [];
  let release!: () => void;
  const first = pool.run(() => new Promise<void>((r) => (release = r)), { kind: 'job' });
  const tasks = [
    pool.run(async () => { order.push('job1'); }, { kind: 'job' }),
    pool.run(async () => { order.push('job2'); }, { kind: 'job' }),
    pool.run(async () => { order.push('sync1'); }),
    pool.run(async () => { order.push('sync2'); }),
    pool.run(async () => { order.push('sync3'); }),
    pool.run(async () => { order.push('sync4'); }),
  ];
  t.same(pool.stats(), { queued: 6, processing: 1, sync: { waiting: 4, running: 0 }, jobs: { waiting: 2, running: 1 } });
  release();
  await first;
  await Promise.all(tasks);
  t.same(order, ['sync1', 'sync2', 'job1', 'sync3', 'sync4', 'job2'], 'sync requests first, never more than 2 in a row while a job waits');
  await pool.drain();
  await t.rejects(pool.run(async () => 1), { code: 'gpu_unavailable' }, 'a draining pool refuses');
});

t.test('WorkPool: an aborted waiter leaves the queue', async (t) => {
  const pool = new WorkPool(1);
  let release!: () => void;
  const running = pool.run(() => new Promise<void>((r) => (release = r)));
  const controller = new AbortController();
  const waiting = pool.run(async () => 'never', { signal: controller.signal, kind: 'job' });
  controller.abort(new Error('gone'));
  await t.rejects(waiting, { message: 'gone' });
  t.equal(pool.stats().queued, 0);
  release();
  await running;
});

async function tempStore(t: Tap.Test, kind: StoreKind, now?: () => number) {
  return openTestStore(t, kind, { now });
}

function newJob(accountId: string, extra: Partial<NewJob> = {}): NewJob {
  return {
    id: crypto.randomUUID(), accountId, keyId: null, options: { size: 'preview', format: 'png', bgColor: null, crop: false },
    sourceKind: 'image_file_b64', sourceUrl: null, input: null, inputDesc: 'base64', callbackUrl: null, billable: true, batchId: null, ...extra,
  };
}

forEachEngine('job table: queue limit, FIFO claims, tokens, done in the charge transaction, recovery', async (t, kind) => {
  let clock = 1_000_000;
  const { store, dir } = await tempStore(t, kind, () => clock);
  // Lets `ms` pass for what the store judges by its clock (src/store/clock.ts): SQLite reads the
  // clock this test moves; PostgreSQL reads its own now(), so the lease times it wrote move back.
  const elapse = async (ms: number) => {
    clock += ms;
    if (kind !== 'postgres') return;
    await store.db.run('UPDATE jobs SET lease_until = lease_until - ? WHERE lease_until IS NOT NULL', [ms]);
    await store.db.run('UPDATE callback_deliveries SET lease_until = lease_until - ? WHERE lease_until IS NOT NULL', [ms]);
    await store.db.run('UPDATE servers SET heartbeat_at = heartbeat_at - ?', [ms]);
  };
  const key = await store.keys.create();
  const [a, b, c] = [newJob(key.account, { input: Buffer.from('bytes of a') }), newJob(key.account, { callbackUrl: 'http://127.0.0.1:9/cb' }), newJob(key.account)];
  t.same(await store.jobs.create([a, b], 2), { created: true, queued: 2 });
  if (kind === 'sqlite') {
    // SQLite keeps a job's input as a private file in the data directory; PostgreSQL in the database.
    t.equal((await fs.stat(path.join(dir, 'jobs', `${a.id}.input`))).mode & 0o777, 0o600);
  }
  t.same(await store.jobs.create([c], 2), { created: false, queued: 2 }, 'past the limit nothing is written');
  t.equal(await store.jobs.getById(c.id), null);
  t.same(await store.jobs.counts(), { queued: 2, processing: 0 });

  const claimA = (await store.jobs.claimNext(60_000))!;
  t.match(claimA, { id: a.id, status: 'processing', attempts: 1 });
  // The lease runs 60 s from now by the store's clock (the database's own on PostgreSQL).
  const leaseFrom = kind === 'postgres' ? Date.now() : clock;
  t.ok(Math.abs(claimA.leaseUntil! - leaseFrom - 60_000) < 5_000, `lease until 60 s from now (${claimA.leaseUntil! - leaseFrom} ms)`);
  t.same(await store.jobs.readInput(a.id), Buffer.from('bytes of a'));
  t.same(claimA.options, a.options);
  const claimB = (await store.jobs.claimNext(60_000))!;
  t.equal(claimB.id, b.id, 'oldest first');
  t.equal(await store.jobs.claimNext(60_000), null);
  t.same(await store.jobs.counts(), { queued: 0, processing: 2 });

  // A charged completion: run, charge, result and job state in one transaction.
  const outcome = await store.ledger.recordRun(
    { id: a.id, accountId: key.account, keyId: key.id, channel: 'job', input: 'base64', size: 'full', credits: 1, ms: 5 },
    { within: async (tx, o) => { t.ok(await store.jobs.markDoneIn(tx, a.id, 1, { creditsCharged: o.creditsCharged, creditsRemaining: o.creditsRemaining }, null)); } },
  );
  t.same(outcome, { creditsCharged: 1, creditsRemaining: 9 });
  t.match(await store.jobs.get(a.id, key.account), { status: 'done', creditsCharged: 1, creditsRemaining: 9 });
  t.equal(await store.jobs.get(a.id, 'acct_other'), null, 'another account does not see it');

  // A completion whose claim was lost rolls the charge back.
  await t.rejects(store.ledger.recordRun(
    { id: b.id, accountId: key.account, keyId: key.id, channel: 'job', input: 'x', size: 'full', credits: 1, ms: 5 },
    { within: async (tx) => { if (!(await store.jobs.markDoneIn(tx, b.id, 99, { creditsCharged: 1, creditsRemaining: 8 }, null))) throw new Error('claim lost'); } },
  ), { message: 'claim lost' });
  t.equal(await store.ledger.balance(key.account), 9, 'not charged');

  // A crash: b is left processing; once its lease ran out it is requeued, and a stale token can no longer finish it.
  t.same(await store.jobs.reclaimAbandoned(3), { requeued: 0, exhausted: [] }, 'not while its lease runs and its server lives');
  await elapse(60_001);
  t.same(await store.jobs.reclaimAbandoned(3), { requeued: 1, exhausted: [] });
  t.equal(await store.jobs.fail(b.id, 1, { code: 'processing_failed', message: 'late' }, null), false, 'the old claim is void');
  const again = (await store.jobs.claimNext(60_000))!;
  t.match(again, { id: b.id, attempts: 2 });
  t.ok(await store.jobs.renewLease(b.id, 2, 60_000));
  t.notOk(await store.jobs.renewLease(b.id, 1, 60_000));
  t.ok(await store.jobs.fail(b.id, 2, { code: 'unsupported_format', message: 'not an image' }, { url: 'http://127.0.0.1:9/cb', body: '{"job_id":"x"}' }));
  t.match(await store.jobs.get(b.id, key.account), { status: 'failed', error: { code: 'unsupported_format', message: 'not an image' } });
  t.match(await store.deliveries.of(b.id), [{ attempts: 0, delivered: false, gaveUp: false }]);

  // Deliveries: due now, then rescheduled, then done.
  const [due] = await store.deliveries.claimDue(10, 60_000);
  t.equal(due.body, '{"job_id":"x"}');
  await store.deliveries.recordAttempt(due.id, { state: 'retry', attempts: 1, nextAttemptAt: clock + 500, lastError: 'HTTP 500' });
  t.same(await store.deliveries.claimDue(10, 60_000), [], 'not due before its time');
  t.equal(await store.deliveries.nextAt(), clock + 500);
  await elapse(500);
  t.equal((await store.deliveries.claimDue(10, 60_000)).length, 1);
  await store.deliveries.recordAttempt(due.id, { state: 'delivered', attempts: 2 });
  t.equal(await store.deliveries.nextAt(), null);

  // An expired lease of a job nobody here runs goes back to the queue; one that is ours does not.
  const d = newJob(key.account);
  await store.jobs.create([d], 10);
  await store.jobs.claimNext(1000);
  await elapse(2000);
  t.equal((await store.jobs.reclaimAbandoned(3, [d.id])).requeued, 0);
  t.equal((await store.jobs.reclaimAbandoned(3, [])).requeued, 1);

  // A job claimed maxAttempts times is reported, not requeued.
  await store.jobs.claimNext(1000);
  await elapse(2000);
  await store.jobs.reclaimAbandoned(3);
  await store.jobs.claimNext(1000);
  await elapse(2000);
  const recovered = await store.jobs.reclaimAbandoned(3);
  t.equal(recovered.requeued, 0);
  t.same(recovered.exhausted.map((j) => [j.id, j.attempts]), [[d.id, 3]]);

  // The purge keeps a finished job while its callback is pending.
  await elapse(10_000);
  const e = newJob(key.account);
  await store.jobs.create([e], 10);
  t.equal(await store.jobs.purge(1), 2, 'a and b (delivered) are purged');
  t.ok(await store.jobs.getById(e.id), 'queued jobs stay');
});

t.test('callback secret: generated once with mode 0600 in the SQLite data directory, or the configured one', async (t) => {
  const { store, dir } = await openTestStore(t, 'sqlite');
  const first = await callbackSecretOf(store, null);
  t.match(first, /^[0-9a-f]{64}$/);
  t.equal((await fs.stat(path.join(dir, 'callback-secret'))).mode & 0o777, 0o600);
  const reopened = await openStore(dir);
  t.teardown(() => reopened.close());
  t.equal(await callbackSecretOf(reopened, null), first, 'kept across starts');
  t.equal(await fs.readFile(path.join(dir, 'callback-secret'), 'utf8'), first, 'the file holds the key alone, no trailing newline');
  await fs.writeFile(path.join(dir, 'callback-secret'), `${first}\n`);
  t.equal(await callbackSecretOf(await openStore(dir).then((s) => (t.teardown(() => s.close()), s)), null), first, 'a newline added by an editor is not part of the key');
  t.equal(await callbackSecretOf(store, 'from-env'), 'from-env');
  const body = '{"job_id":"1"}';
  t.equal(signBody(body, 'k'), `sha256=${crypto.createHmac('sha256', 'k').update(body).digest('hex')}`);
});
