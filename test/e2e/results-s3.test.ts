/**
 * Results in an object store (`--results s3://BUCKET/PREFIX`) against a real S3 API: s3rver in
 * this process (test/helpers/s3.ts), stopped for an outage. (The store's own tests over S3 that
 * need no outage are in test/results-s3-store.test.ts, on the run's shared s3rver.) The store
 * when the object store is down or an upload is cut half-way (nothing readable, nothing charged);
 * then `cutout serve` with the real model:
 * the sync result behind X-Job-Id, a job and its callback's URL, a batch, and the sweeper
 * deleting expired objects, with no result bytes in the data directory or the database.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { CutoutError } from '../../src/errors.js';
import { openStore, type NewJob, type Store, type StoreKind } from '../../src/store/db.js';
import { bearer, createKey, startServe, upload } from '../helpers/api-server.js';
import { startReceiver } from '../helpers/callback-receiver.js';
import { FIXTURES } from '../helpers/cli.js';
import { until } from '../helpers/process.js';
import { testS3, TEST_BUCKET } from '../helpers/s3.js';
import { ENGINES, storeUrl, tempDir, objectsUnder as objectsUnderIn, openS3Store } from '../helpers/stores.js';

const s3 = await testS3(t);
// This process's own stores reach s3rver through the SDK's standard variables, as a server does.
Object.assign(process.env, s3.env);

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const chelseaB64 = chelsea.toString('base64');

const s3Store = (t: Tap.Test, kind: StoreKind, clock: { now: number }) => openS3Store(t, kind, clock, TEST_BUCKET);
const objectsUnder = (prefix: string) => objectsUnderIn(s3, prefix);

function run(accountId: string, id: string, data: Buffer, credits: 0 | 1 = 1) {
  return { id, accountId, keyId: null, channel: 'api' as const, input: 'upload', size: 'full' as const, credits, ms: 5, result: { data, ext: 'png', contentType: 'image/png', width: 4, height: 3 } };
}

for (const kind of ENGINES) {
  t.test(`[${kind}] a job's upload waits in the object store, not the database, and is gone once the job ends`, async (t) => {
    const clock = { now: Date.now() };
    const { store, prefix, dir } = await s3Store(t, kind, clock);
    const { account } = await store.keys.create({});
    const id = crypto.randomUUID();
    const image = crypto.randomBytes(2 * 1024 * 1024 + 5);
    const job = {
      id, accountId: account, keyId: null, options: { size: 'preview' } as NewJob['options'], sourceKind: 'image_file' as const, sourceUrl: null,
      input: image, inputDesc: 'upload', callbackUrl: null, billable: true, batchId: null,
    };
    t.same(await store.jobs.create([job], 10), { created: true, queued: 1 });
    t.same(await objectsUnder(prefix), [`${prefix}/inputs/${id}.input`], 'the upload is an object beside the results');
    if (kind === 'postgres') t.equal((await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM job_inputs'))?.n, 0, 'no bytes in PostgreSQL');
    else t.same(await fs.readdir(path.join(dir, 'jobs')).catch(() => []), [], 'no file in the data directory');
    const claimed = (await store.jobs.claimNext(60_000))!;
    t.ok((await store.jobs.readInput(claimed.id))?.equals(image), 'the worker reads it back whole');
    t.ok(await store.jobs.fail(claimed.id, claimed.attempts, { code: 'processing_failed', message: 'x' }, null));
    await store.jobs.removeInput(id);
    t.same(await objectsUnder(prefix), [], 'deleted once the job ended');
    t.equal(await store.jobs.removeOrphanInputs(), 0, 'and nothing left for the sweep');

    await s3.stop();
    try {
      const refused = await store.jobs.create([{ ...job, id: crypto.randomUUID() }], 10).then(() => null, (e: unknown) => e);
      t.match(refused, { code: 'gpu_unavailable', status: 503, reason: 'results_unavailable' }, 'an upload the object store cannot take: 503');
      t.same(await store.jobs.counts(), { queued: 0, processing: 0 }, 'nothing queued');
    } finally {
      await s3.start();
    }
  });
}

t.test('[sqlite] the object store down: nothing charged, nothing recorded; reads and readiness fail as unavailable', async (t) => {
  const clock = { now: Date.now() };
  const { store, prefix } = await s3Store(t, 'sqlite', clock);
  const { account } = await store.keys.create({});
  const kept = crypto.randomUUID();
  await store.ledger.recordRun(run(account, kept, Buffer.from('kept')));
  const row = await store.results.find(kept, 3600);
  await store.results.ping();

  await s3.stop();
  try {
    const lost = crypto.randomUUID();
    const err = await store.ledger.recordRun(run(account, lost, Buffer.from('never stored'))).then(() => null, (e: unknown) => e);
    t.ok(err instanceof CutoutError, 'a CutoutError');
    t.match(err, { code: 'gpu_unavailable', status: 503, headers: { 'Retry-After': /^\d+$/ } }, '503 with Retry-After');
    t.equal(await store.ledger.balance(account), 9, 'not charged');
    t.equal(await store.results.find(lost, 3600), null, 'no row');
    t.equal((await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM runs WHERE id = ?', [lost]))?.n, 0, 'no run');
    await t.rejects(store.results.open(row!), { code: 'gpu_unavailable', status: 503 }, 'a read is unavailable, not not-found');
    await t.rejects(store.results.ping(), 'the readiness probe fails');
    // The purge cannot delete the objects: it keeps their rows for the next round.
    clock.now += 7200 * 1000;
    await t.rejects(store.results.purge(3600));
    t.equal((await store.db.all('SELECT 1 FROM results')).length, 1, 'the row stays while its object could not be deleted');
  } finally {
    await s3.start();
  }
  t.equal(await store.results.purge(3600), 1, 'purged once the store is back');
  t.same(await objectsUnder(prefix), []);
});

t.test('[postgres] an upload cut half-way leaves nothing a read could return, and charges nothing', async (t) => {
  // Between the store and s3rver: forwards small requests, and cuts a connection once its client
  // has sent more than 512 KiB (every attempt of a larger upload, the SDK's retries included).
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const upstream = net.connect(s3.port, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => { sockets.delete(s); client.destroy(); upstream.destroy(); });
    }
    let sent = 0;
    client.on('data', (d: Buffer) => {
      sent += d.length;
      if (sent > 512 * 1024) client.destroy();
      else upstream.write(d);
    });
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.teardown(() => { for (const s of sockets) s.destroy(); proxy.close(); });
  const direct = process.env.AWS_ENDPOINT_URL_S3;
  process.env.AWS_ENDPOINT_URL_S3 = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  const clock = { now: Date.now() };
  let opened;
  try {
    opened = await s3Store(t, 'postgres', clock);
  } finally {
    process.env.AWS_ENDPOINT_URL_S3 = direct;
  }
  const { store } = opened;
  const { account } = await store.keys.create({});
  const small = crypto.randomUUID();
  await store.ledger.recordRun(run(account, small, Buffer.from('small enough')));
  t.ok((await store.results.get(small, 3600))?.data.equals(Buffer.from('small enough')), 'the proxy passes small uploads');

  const cut = crypto.randomUUID();
  await t.rejects(store.ledger.recordRun(run(account, cut, crypto.randomBytes(2 * 1024 * 1024))), { code: 'gpu_unavailable', status: 503 }, 'the cut upload fails the run as unavailable');
  t.equal(await store.ledger.balance(account), 9, 'charged for the small one only');
  t.equal(await store.results.find(cut, 3600), null, 'no row points to it');
  // Whether a partial object exists is the object store's affair: real S3 never makes a cut upload
  // visible; s3rver keeps what arrived, sometimes after the failed attempt's key was deleted again
  // (it finishes the cut request late). Either way no row points to it, so nothing serves it:
  t.equal(await store.results.get(cut, 3600), null, 'nothing is served for it');
  t.equal((await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM runs WHERE id = ?', [cut]))?.n, 0, 'no run was recorded');
});

t.test('cutout serve --results s3://...: sync, jobs, callbacks, batches and expiry', async (t) => {
  const prefix = 'api';
  const receiver = await startReceiver(t);
  // A short retention, so that the sweeper's deletions are seen; every flow reads its result at once.
  const srv = await startServe(t, [
    '--results', `s3://${TEST_BUCKET}/${prefix}`, '--results-path-style', '--workers', '1', '--allow-private-network',
    '--result-ttl', '30', '--rate-limit', '100000', '--callback-backoff', '50',
  ], { env: s3.env });
  const k = await createKey(srv.dataDir);
  const ids: string[] = [];
  const store = await openStore(srv.dataDir);
  t.teardown(() => store.close());
  /** The result of `id` is an object, and its row holds the object's key (checked as soon as it exists: they expire). */
  const inBucket = async (id: string) => {
    const objects = (await objectsUnder(prefix)).filter((o) => o.startsWith(`${prefix}/${id}.`));
    const row = await store.db.get<{ path: string }>('SELECT path FROM results WHERE job_id = ?', [id]);
    t.equal(objects.length, 1, `one object for ${id}`);
    t.equal(row?.path, objects[0], 'its row holds the key');
  };

  const ready = await fetch(`${srv.url}/readyz`);
  t.equal(ready.status, 200);
  t.match(await ready.json(), { status: 'ready', checks: { store: 'ready', results: 'ready' } });

  // Sync: the answer's bytes and the result behind X-Job-Id are the object's.
  const sync = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(k.key), body: upload(chelsea, { size: 'preview', quality: 'fast' }) });
  t.equal(sync.status, 200);
  const syncBytes = Buffer.from(await sync.arrayBuffer());
  const syncId = sync.headers.get('x-job-id')!;
  ids.push(syncId);
  const again = await fetch(`${srv.url}/api/v1/results/${syncId}`);
  t.equal(again.status, 200);
  t.equal(again.headers.get('content-type'), 'image/png');
  t.ok(Buffer.from(await again.arrayBuffer()).equals(syncBytes), 'GET of X-Job-Id streams the same bytes');
  await inBucket(syncId);

  // A job with a callback: the callback's URL serves the result.
  const job = await fetch(`${srv.url}/api/v1/jobs`, {
    method: 'POST', headers: bearer(k.key, { 'X-Callback-Url': `${receiver.url}/done` }), body: upload(chelsea, { size: 'full', quality: 'fast' }),
  });
  t.equal(job.status, 202);
  const jobId = ((await job.json()) as any).job_id as string;
  ids.push(jobId);
  const [callback] = await receiver.waitFor((r) => r.path === '/done');
  t.match(callback.json, { job_id: jobId, status: 'done', credits_charged: 1 });
  const viaCallback = await fetch(callback.json.url);
  t.equal(viaCallback.status, 200);
  t.same((await sharp(Buffer.from(await viaCallback.arrayBuffer())).metadata()).width, 451, 'the full-size result');
  await inBucket(jobId);

  // A batch: every item's result is served.
  const batch = await fetch(`${srv.url}/api/v1/jobs/batch`, {
    method: 'POST', headers: bearer(k.key, { 'Content-Type': 'application/json' }), body: JSON.stringify({ images: [{ image_file_b64: chelseaB64 }, { image_file_b64: chelseaB64 }], quality: 'fast' }),
  });
  t.equal(batch.status, 202);
  const batchIds = ((await batch.json()) as any).job_ids as string[];
  ids.push(...batchIds);
  for (const id of batchIds) {
    const done = await until(`batch job ${id}`, async () => {
      const j = (await (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(k.key) })).json()) as any;
      return j.status === 'done' || j.status === 'failed' ? j : null;
    });
    t.equal(done.status, 'done', `batch job done ${JSON.stringify(done.error ?? '')}`);
    const res = await fetch(done.url);
    t.equal(res.status, 200, `batch result ${id} served`);
    await res.arrayBuffer();
    await inBucket(id);
  }

  t.same(await fs.readdir(path.join(srv.dataDir, 'results')).catch(() => []), [], 'no result file in the data directory');
  t.equal((await store.ledger.balance(k.account)), 9, 'one charge: the full-size job');

  // Expiry: the sweeper deletes the objects and their rows.
  await until('the sweeper to delete the expired objects', async () => (await objectsUnder(prefix)).length === 0, 60_000);
  t.pass('every expired object deleted');
  t.equal((await fetch(`${srv.url}/api/v1/results/${syncId}`)).status, 404, 'an expired result is gone');
  t.equal((await store.db.all('SELECT 1 FROM results')).length, 0, 'and so are its rows');
});
