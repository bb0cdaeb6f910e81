/**
 * The upstream inference server dies while a job runs: the job goes back to the queue (never
 * `failed`), finishes once the server is back on the same address, and is charged once. A sync
 * request during the outage gets 503 gpu_unavailable with Retry-After, uncharged. Real processes:
 * `cutout serve --upstream` and `cutout model-server`, killed with SIGKILL and started again.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { balanceOf, bearer, createKey, errorCode, startServe, upload } from '../helpers/api-server.js';
import { FIXTURES } from '../helpers/cli.js';
import { freePort, startModelServer } from '../helpers/model-server.js';

async function getJob(url: string, key: string, id: string): Promise<any> {
  return (await fetch(`${url}/api/v1/jobs/${id}`, { headers: bearer(key) })).json();
}

/**
 * A pass-through HTTP proxy in front of the upstream, so the test decides when the outage starts:
 * the first inference request is forwarded, then `onFirstInfer` runs (it kills the upstream) and
 * the upstream's answer, if any came, is never relayed. Serve cannot finish the job first.
 */
async function startProxy(t: Tap.Test, target: string, onFirstInfer: () => Promise<void>): Promise<string> {
  let seenInfer = false;
  const server = http.createServer((req, res) => {
    const first = !seenInfer && req.method === 'POST' && /\/infer$/.test(req.url ?? '');
    if (first) seenInfer = true;
    const forwarded = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
      if (first) return answer.resume(); // held: the job cannot finish before the kill
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
    if (first) forwarded.on('finish', () => void onFirstInfer().finally(() => res.destroy()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  }));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

t.test('upstream killed during a job: the job waits in the queue, then finishes once, charged once; sync gets 503', async (t) => {
  const port = await freePort();
  let upstream = await startModelServer(t, ['--port', String(port)]);
  // The job's inference request reaches the upstream, which is then killed while serve waits.
  let jobId = '';
  let statusAtKill = '';
  let killed: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | null = null;
  let markKilled!: () => void;
  const upstreamKilled = new Promise<void>((resolve) => (markKilled = resolve));
  const upstreamUrl = await startProxy(t, `http://127.0.0.1:${port}`, async () => {
    // The request may come before the test has read the job id from the 202.
    while (!jobId) await new Promise((r) => setTimeout(r, 10));
    statusAtKill = (await getJob(srv.url, key.key, jobId)).status;
    killed = upstream.stop('SIGKILL');
    await killed;
    markKilled();
  });
  const srv = await startServe(t, ['--upstream', upstreamUrl, '--workers', '1', '--rate-limit', '100000']);
  const key = await createKey(srv.dataDir);
  t.equal(await balanceOf(srv.url, key.key), 10);
  const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg'));

  const submitted = await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key.key), body: upload(chelsea, { size: 'full', format: 'png' }) });
  t.equal(submitted.status, 202);
  jobId = ((await submitted.json()) as any).job_id;

  // The upstream is killed once the job's inference request has reached it (the proxy holds the answer).
  await upstreamKilled;
  t.equal(statusAtKill, 'processing', 'the job was running when the upstream died');
  t.equal((await killed!).signal, 'SIGKILL', 'the upstream was killed');

  // The outage: the job goes back to the queue and does not fail; sync requests get 503, uncharged.
  const statuses = new Set<string>();
  for (let until = Date.now() + 4_000; Date.now() < until;) {
    statuses.add((await getJob(srv.url, key.key, jobId)).status);
    await new Promise((r) => setTimeout(r, 50));
  }
  t.ok(statuses.has('queued'), `the job went back to the queue (seen: ${[...statuses].join(', ')})`);
  t.notOk(statuses.has('failed') || statuses.has('done'), 'neither failed nor done during the outage');

  const sync = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(chelsea, { size: 'full' }) });
  const retryAfter = sync.headers.get('retry-after');
  const err = await errorCode(sync);
  t.equal(err.status, 503);
  t.equal(err.code, 'gpu_unavailable');
  t.match(retryAfter, /^[1-9][0-9]*$/, `Retry-After: ${retryAfter}`);
  t.equal(await balanceOf(srv.url, key.key), 10, 'nothing charged for the refused sync request');
  const health = await fetch(`${srv.url}/api/v1/health`);
  t.equal(health.status, 200, 'health stays 200');
  const body = (await health.json()) as any;
  t.same({ inference: body.inference, ready: body.upstream.ready, url: body.upstream.url }, { inference: 'upstream', ready: false, url: upstreamUrl });

  // The upstream comes back on the same address: the job finishes, charged once.
  upstream = await startModelServer(t, ['--port', String(port)]);
  let job: any;
  for (let until = Date.now() + 90_000; Date.now() < until;) {
    job = await getJob(srv.url, key.key, jobId);
    if (job.status === 'done' || job.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(job.status, 'done', `the job finished after the outage: ${JSON.stringify(job.error ?? '')}`);
  t.equal(job.credits_charged, 1);
  t.equal(job.credits_remaining, 9);
  t.equal(await balanceOf(srv.url, key.key), 9, 'charged once');
  const result = await fetch(job.url);
  t.equal(result.status, 200);
  const meta = await sharp(Buffer.from(await result.arrayBuffer())).metadata();
  t.same([meta.format, meta.width, meta.height, meta.channels], ['png', 451, 300, 4], 'the full-size cutout');
  t.match(srv.stderr(), /back in the queue/, 'the requeue is logged');
  t.notOk(srv.stderr().includes(jobId), 'without the job id: it is the result\'s capability URL');
  const healthAfter = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
  t.equal(healthAfter.upstream.ready, true, 'ready again');
});
