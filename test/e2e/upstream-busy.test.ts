/**
 * A busy upstream is not a down one: `serve --upstream` retries a 503 with Retry-After, Triton's
 * 503 "exceeds maximum queue size", a 429 and a 408 (a gateway's) with jitter within the call's
 * deadline; the request and the job succeed, uncharged until done, and no outage is declared. A
 * 503 without Retry-After stays an outage. Redirects are refused at start. Real processes: serve,
 * `cutout model-server`, and a small HTTP proxy between them that answers busy on command.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { balanceOf, bearer, createKey, errorCode, startServe, upload } from '../helpers/api-server.js';
import { FIXTURES, runCli } from '../helpers/cli.js';
import { startModelServer } from '../helpers/model-server.js';

interface BusyAnswer { status: number; headers?: Record<string, string>; error?: string }

/** A proxy that answers the next inferences from `queue`, then forwards them to `target`. */
async function startBusyProxy(t: Tap.Test, target: string): Promise<{ url: string; queue: BusyAnswer[]; infers: number }> {
  const state = { url: '', queue: [] as BusyAnswer[], infers: 0 };
  const server = http.createServer((req, res) => {
    const infer = req.method === 'POST' && /\/infer$/.test(req.url ?? '');
    if (infer) state.infers++;
    const busy = infer ? state.queue.shift() : undefined;
    if (busy) {
      req.resume();
      req.on('end', () => {
        const text = JSON.stringify({ error: busy.error ?? `busy on purpose (${busy.status})` });
        res.writeHead(busy.status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...busy.headers });
        res.end(text);
      });
      return;
    }
    const forwarded = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  }));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}

const FIXTURE = path.join(FIXTURES, 'chelsea.jpg');

t.test('busy answers are retried: sync and jobs succeed, no outage', async (t) => {
  const upstream = await startModelServer(t, ['--port', '0', '--precision', 'fp32']);
  const proxy = await startBusyProxy(t, upstream.url);
  const srv = await startServe(t, ['--upstream', proxy.url, '--workers', '1', '--rate-limit', '100000']);
  const key = await createKey(srv.dataDir);
  const image = await fs.readFile(FIXTURE);
  const remove = () => fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(image, { size: 'full', format: 'png' }) });

  for (const [what, answers] of [
    ['503 with Retry-After (a model server whose queue is full)', [{ status: 503, headers: { 'Retry-After': '1' } }]],
    ['Triton\'s 503 for a full queue (no Retry-After)', [{ status: 503, error: 'exceeds maximum queue size' }]],
    ['429 and 408 from a gateway', [{ status: 429 }, { status: 408 }, { status: 429, headers: { 'Retry-After': '1' } }]],
  ] as [string, BusyAnswer[]][]) {
    const before = proxy.infers;
    proxy.queue.push(...answers);
    const res = await remove();
    t.equal(res.status, 200, `${what}: retried, then answered`);
    await res.arrayBuffer();
    t.equal(proxy.infers - before, answers.length + 1, `${answers.length} busy answer(s), then the inference`);
  }
  t.equal(await balanceOf(srv.url, key.key), 7, 'charged once per image');

  // A job meets a busy upstream: it is done, not failed and not put back as after an outage.
  proxy.queue.push({ status: 503, headers: { 'Retry-After': '1' } }, { status: 429 });
  const submitted = await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key.key), body: upload(image, { size: 'full', format: 'png' }) });
  t.equal(submitted.status, 202);
  const id = ((await submitted.json()) as any).job_id as string;
  let job: any;
  for (const until = Date.now() + 90_000; Date.now() < until;) {
    job = await (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key.key) })).json();
    if (job.status === 'done' || job.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(job.status, 'done', `the job is done: ${JSON.stringify(job.error ?? '')}`);
  t.equal(proxy.queue.length, 0, 'the busy answers were used');
  t.notMatch(srv.stderr(), /back in the queue/, 'a busy upstream is not an outage: no requeue');
  const health = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
  t.equal(health.upstream.ready, true, 'and health still says ready');

  // A 503 without Retry-After (a proxy whose backend is gone) is still an outage at once.
  proxy.queue.push({ status: 503 });
  const down = await remove();
  const e = await errorCode(down);
  t.same([e.status, e.code], [503, 'gpu_unavailable'], 'a 503 without Retry-After: gpu_unavailable');
  t.notMatch(e.message, /busy on purpose/, 'the upstream\'s own text is not shown to the client');
  t.match(srv.stderr(), /answered 503: busy on purpose \(503\)/, 'it is in the server\'s log');
});

/** `cutout serve --upstream` at `server` (listening here on a free port), in a data directory of its own. */
async function serveAgainst(t: Tap.Test, server: http.Server) {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const dir = await fs.mkdtemp(path.join((await import('node:os')).tmpdir(), 'cutout-upstream-start-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  return runCli(['serve', '--port', '0', '--data', dir, '--upstream', `http://127.0.0.1:${(server.address() as AddressInfo).port}`]);
}

t.test('an upstream that redirects is refused at start: redirects are not followed', async (t) => {
  const server = http.createServer((req, res) => {
    res.writeHead(307, { Location: `http://127.0.0.1:9${req.url}` });
    res.end();
  });
  const r = await serveAgainst(t, server);
  t.equal(r.code, 2, 'exit code 2');
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
  t.match(r.stderr, /answered GET \/v2 with a redirect \(307 to http:\/\/127\.0\.0\.1:9\/v2\); redirects are not followed/);
});

t.test('metadata and health answers are read up to a cap: a huge /v2 stops the start with one line', async (t) => {
  // A valid answer padded with 2 MB of spaces: before, read whole and accepted.
  const padded = `{"name": "huge", "version": "1", "extensions": []${' '.repeat(2_000_000)}}`;
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' }); // no Content-Length: cut as it streams
    res.end(padded);
  });
  const r = await serveAgainst(t, server);
  t.equal(r.code, 2, 'exit code 2');
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
  t.match(r.stderr, /answered GET \/v2 with longer than 1 MB, over the 1 MB a protocol answer of this kind may take/);
});
