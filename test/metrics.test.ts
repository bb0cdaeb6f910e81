/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model;
 * what follows of `cutout serve` and the real model is what `npm run test:s3-results` runs.
 *
 * GET /metrics on the real `cutout serve` (a child process on a free port, a real SQLite store,
 * the real model): request counters move by route pattern and status, the job gauges follow real
 * jobs (held in place by an image server that answers only when told), inference and callback
 * deliveries are counted, the process metrics are there, and --no-metrics makes it a 404.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { bearer, createKey, errorCode, startApi } from './helpers/api-server.js';
import { startReceiver } from './helpers/callback-receiver.js';
import { startHeldImageServer } from './helpers/held-image.js';
import { FIXTURES } from './helpers/cli.js';
import { until } from './helpers/process.js';
import { sample, scrape } from './helpers/metrics.js';

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg'));



t.test('/metrics: request durations by route pattern, job gauges, inference, callbacks, process metrics', async (t) => {
  const images = await startHeldImageServer(t, chelsea);
  const receiver = await startReceiver(t);
  const srv = await startApi(t, ['--workers', '1', '--allow-private-network', '--rate-limit', '100000']);
  const { key } = await createKey(srv.dataDir);

  const first = await fetch(`${srv.url}/metrics`);
  t.equal(first.status, 200);
  t.match(first.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  t.equal(first.headers.get('www-authenticate'), null, 'no authentication asked');
  const before = await first.text();
  t.ok(sample(before, 'process_cpu_seconds_total') !== null, 'process metrics (cpu)');
  t.ok(sample(before, 'nodejs_heap_size_used_bytes') !== null, 'process metrics (heap)');
  t.equal(sample(before, 'cutout_store_info', { store: 'sqlite' }), 1, 'the store in use');
  t.equal(sample(before, 'cutout_results_info', { results: 'files' }), 1, 'results as files in the data directory');
  t.equal(sample(before, 'cutout_results_ready'), null, 'no object store, so no cutout_results_ready');
  t.equal(sample(before, 'cutout_inference_slots', { state: 'total' }), 1, '--workers 1');
  for (const outcome of ['delivered', 'retry', 'gave_up']) {
    t.equal(sample(before, 'cutout_callback_deliveries_total', { outcome }), 0, `callbacks ${outcome} start at 0`);
  }
  for (const channel of ['api', 'job']) t.equal(sample(before, 'cutout_credits_charged_total', { channel }), 0, `credits charged (${channel}) start at 0`);
  const accountOk = { method: 'GET', route: '/api/v1/account', status: '200' };
  t.equal(sample(before, 'cutout_http_request_duration_seconds_count', accountOk), null, 'no account request yet');

  // Two good requests, one refused, one on an unknown path, one with an id in the path.
  for (let i = 0; i < 2; i++) t.equal((await fetch(`${srv.url}/api/v1/account`, { headers: bearer(key) })).status, 200);
  t.equal((await fetch(`${srv.url}/api/v1/account`)).status, 401);
  t.equal((await fetch(`${srv.url}/no/such/${crypto.randomUUID()}`)).status, 404);
  const unknownJob = crypto.randomUUID();
  t.equal((await fetch(`${srv.url}/api/v1/jobs/${unknownJob}`, { headers: bearer(key) })).status, 404);

  const after = await scrape(srv.url);
  t.equal(sample(after, 'cutout_http_request_duration_seconds_count', accountOk), 2, 'two 200s on /api/v1/account');
  t.equal(sample(after, 'cutout_http_request_duration_seconds_count', { ...accountOk, status: '401' }), 1, 'one 401');
  t.equal(sample(after, 'cutout_http_request_duration_seconds_count', { route: 'unmatched', status: '404' }), 1, 'unknown paths share one label');
  t.equal(sample(after, 'cutout_http_request_duration_seconds_count', { route: '/api/v1/jobs/:job_id', status: '404' }), 1, 'the pattern, not the URL');
  t.equal(sample(after, 'cutout_http_request_duration_seconds_count', { route: '/metrics', status: '200' }), 1, 'the first scrape counted');
  t.ok((sample(after, 'cutout_http_request_duration_seconds_bucket', { ...accountOk, le: '+Inf' }) ?? 0) === 2, 'histogram buckets');
  t.notOk(after.includes(unknownJob), 'no raw id in any label');

  // Three jobs on one slot: the first fetches from the held image server, two stay queued.
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${srv.url}/api/v1/jobs`, {
      method: 'POST',
      headers: bearer(key, { 'Content-Type': 'application/json', 'X-Callback-Url': `${receiver.url}/cb` }),
      body: JSON.stringify({ image_url: images.url, quality: 'fast' }),
    });
    t.equal(res.status, 202);
    ids.push(((await res.json()) as any).job_id);
  }
  await until('the first job to fetch its image', async () => images.requests() >= 1);
  const held = await scrape(srv.url);
  t.equal(sample(held, 'cutout_jobs', { state: 'processing' }), 1, 'one job processing');
  t.equal(sample(held, 'cutout_jobs', { state: 'queued' }), 2, 'two jobs queued');
  t.equal(sample(held, 'cutout_queue_depth', { kind: 'job' }), 2, 'queue depth: the queued jobs');
  t.equal(sample(held, 'cutout_queue_depth', { kind: 'sync' }), 0, 'no sync request waiting');
  t.equal(sample(held, 'cutout_inference_slots', { state: 'busy' }), 1, 'the one slot is busy');
  t.equal(sample(held, 'cutout_inference_seconds_count', { quality: 'fast' }), null, 'no inference yet');

  images.release();
  await receiver.waitFor((r) => r.path === '/cb', 3, 120_000);
  const done = await until('the delivery count to reach 3', async () => {
    const text = await scrape(srv.url);
    return sample(text, 'cutout_callback_deliveries_total', { outcome: 'delivered' }) === 3 && text;
  });
  t.equal(sample(done, 'cutout_jobs', { state: 'processing' }), 0, 'none processing');
  t.equal(sample(done, 'cutout_jobs', { state: 'queued' }), 0, 'none queued');
  t.equal(sample(done, 'cutout_inference_seconds_count', { quality: 'fast' }), 3, 'three inferences at quality fast');
  t.ok((sample(done, 'cutout_inference_seconds_sum', { quality: 'fast' }) ?? 0) > 0, 'with their time');
  t.equal(sample(done, 'cutout_pipeline_seconds_count', { quality: 'fast' }), 3, 'three images end to end');
  t.ok((sample(done, 'cutout_pipeline_seconds_sum', { quality: 'fast' }) ?? 0) >= (sample(done, 'cutout_inference_seconds_sum', { quality: 'fast' }) ?? Infinity), 'the pipeline time covers the inference');
  t.equal(sample(done, 'cutout_callback_deliveries_total', { outcome: 'retry' }), 0, 'no retry');
  t.equal(sample(done, 'cutout_http_request_duration_seconds_count', { method: 'POST', route: '/api/v1/jobs', status: '202' }), 3, 'three job creations');
  let charged = 0;
  for (const id of ids) charged += ((await (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key) })).json()) as any).credits_charged;
  t.equal(sample(done, 'cutout_credits_charged_total', { channel: 'job' }), charged, `credits charged by jobs: what the jobs say (${charged}: previews are free)`);
  t.equal(sample(done, 'cutout_credits_charged_total', { channel: 'api' }), 0, 'no sync removal yet');
  // A full-size sync removal costs a credit: counted under api.
  const form = new FormData();
  form.append('image_file', new Blob([chelsea]), 'chelsea.jpg');
  form.append('size', 'full');
  const sync = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: form });
  t.equal(sync.status, 200);
  t.equal(Number(sync.headers.get('x-credits-charged')), 1, 'the sync removal was charged 1 credit');
  t.equal(sample(await scrape(srv.url), 'cutout_credits_charged_total', { channel: 'api' }), 1, 'credits charged: 1 under api');
});

t.test('--no-metrics: /metrics is a 404 with the error body; the API still serves', async (t) => {
  const srv = await startApi(t, ['--no-metrics']);
  const res = await fetch(`${srv.url}/metrics`);
  const { status, code } = await errorCode(res);
  t.same([status, code], [404, 'not_found']);
  t.ok(res.headers.get('x-request-id'), 'with its request id');
  t.equal((await fetch(`${srv.url}/api/v1/health`)).status, 200);
});

