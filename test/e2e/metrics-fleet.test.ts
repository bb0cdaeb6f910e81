/**
 * A fleet of two `cutout serve` children on one PostgreSQL (moved from metrics.test.ts, whose
 * other tests run in process: each server must name its own process).
 *
 * GET /metrics on the real `cutout serve` (a child process on a free port, a real SQLite store,
 * the real model): request counters move by route pattern and status, the job gauges follow real
 * jobs (held in place by an image server that answers only when told), inference and callback
 * deliveries are counted, the process metrics are there, and --no-metrics makes it a 404.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import { bearer, createKey, startServe } from '../helpers/api-server.js';
import { startHeldImageServer } from '../helpers/held-image.js';
import { FIXTURES } from '../helpers/cli.js';
import { testPostgres } from '../helpers/postgres.js';
import { until } from '../helpers/process.js';
import { sample, scrape } from '../helpers/metrics.js';

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg'));



t.test('a fleet on one PostgreSQL: every server reports the fleet-wide job gauges and its own requests', async (t) => {
  const pg = await testPostgres(t);
  const url = await pg.freshDatabase();
  const images = await startHeldImageServer(t, chelsea);
  const a = await startServe(t, ['--store', url, '--workers', '1', '--allow-private-network']);
  const b = await startServe(t, ['--store', url, '--workers', '1', '--allow-private-network']);
  const { key } = await createKey(a.dataDir, ['--store', url]);

  // Four jobs through A: each server holds one on the stalled image, two stay queued.
  for (let i = 0; i < 4; i++) {
    const res = await fetch(`${a.url}/api/v1/jobs`, {
      method: 'POST',
      headers: bearer(key, { 'Content-Type': 'application/json' }),
      body: JSON.stringify({ image_url: images.url }),
    });
    t.equal(res.status, 202);
  }
  await until('both servers to fetch', async () => images.requests() >= 2);
  for (const [name, srv] of [['A', a], ['B', b]] as const) {
    const text = await scrape(srv.url);
    t.equal(sample(text, 'cutout_store_info', { store: 'postgres' }), 1, `${name}: the store is postgres`);
    t.equal(sample(text, 'cutout_results_info', { results: 'database' }), 1, `${name}: results in PostgreSQL`);
    t.equal(sample(text, 'cutout_jobs', { state: 'processing' }), 2, `${name}: two jobs processing in the fleet`);
    t.equal(sample(text, 'cutout_jobs', { state: 'queued' }), 2, `${name}: two queued in the fleet`);
    t.equal(sample(text, 'cutout_inference_slots', { state: 'busy' }), 1, `${name}: its own slot is busy`);
  }
  const aText = await scrape(a.url);
  const bText = await scrape(b.url);
  t.equal(sample(aText, 'cutout_http_request_duration_seconds_count', { route: '/api/v1/jobs', status: '202' }), 4, 'A counts the creations it answered');
  t.equal(sample(bText, 'cutout_http_request_duration_seconds_count', { route: '/api/v1/jobs', status: '202' }), null, 'B answered none');
  const health = (await (await fetch(`${b.url}/api/v1/health`)).json()) as any;
  t.equal(health.store, 'postgres');
  t.equal(health.server.pid, b.child.pid, 'B names itself');
});
