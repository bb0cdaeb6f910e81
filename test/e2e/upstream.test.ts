/**
 * `cutout serve --upstream`: the pipeline runs in serve, the model call goes over the Open
 * Inference Protocol v2. Real processes on loopback: the real model in `cutout model-server`
 * (binary tensors) and in a minimal JSON-only protocol server (test/helpers/minimal-oip.ts).
 * The cutout through either matches the local one within 1/255 of alpha.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { balanceOf, bearer, createKey, errorCode, startServe, upload } from '../helpers/api-server.js';
import { FIXTURES, runCli } from '../helpers/cli.js';
import { startMinimalOip } from '../helpers/minimal-oip.js';
import { startModelServer } from '../helpers/model-server.js';

const FIXTURE = path.join(FIXTURES, 'chelsea.jpg');

async function alphaChannel(png: Buffer | string): Promise<{ alpha: Uint8Array; width: number; height: number }> {
  const { data, info } = await sharp(png).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const alpha = new Uint8Array(info.width * info.height);
  for (let i = 0; i < alpha.length; i++) alpha[i] = data[i * info.channels + info.channels - 1];
  return { alpha, width: info.width, height: info.height };
}

/**
 * The local cutout at a precision, once each: the CLI on the same pipeline and worker thread as a
 * local serve. `isnet-medium` is fp32 on every server (`cutout model-server` under any
 * --precision, the minimal server, Triton with the exported repository); `isnet-medium-int8` is
 * the int8 copy the CLI runs with --precision int8.
 */
const localPngs = new Map<string, Promise<Buffer>>();
function localCutout(t: Tap.Test, precision: 'int8' | 'fp32'): Promise<Buffer> {
  if (!localPngs.has(precision)) localPngs.set(precision, (async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-upstream-'));
    t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
    const out = path.join(dir, 'local.png');
    const r = await runCli([FIXTURE, '-o', out, '--size', 'full', '--quality', 'best', '--format', 'png', '--precision', precision, '--data', path.join(dir, 'home')]);
    if (r.code !== 0) throw new Error(`local run failed: ${r.stderr}`);
    return fs.readFile(out);
  })());
  return localPngs.get(precision)!;
}

async function compareWithLocal(t: Tap.Test, remotePng: Buffer, precision: 'int8' | 'fp32'): Promise<void> {
  const local = await alphaChannel(await localCutout(t, precision));
  const remote = await alphaChannel(remotePng);
  t.same([remote.width, remote.height], [local.width, local.height], 'same size');
  let maxDiff = 0;
  for (let i = 0; i < local.alpha.length; i++) maxDiff = Math.max(maxDiff, Math.abs(local.alpha[i] - remote.alpha[i]));
  t.ok(maxDiff <= 1, `alpha within 1/255 of the local cutout (max difference ${maxDiff})`);
  const opaque = remote.alpha.filter((a) => a === 255).length;
  const clear = remote.alpha.filter((a) => a === 0).length;
  t.ok(opaque > remote.alpha.length * 0.05 && clear > remote.alpha.length * 0.05, `a real cutout: ${opaque} opaque and ${clear} clear pixels`);
}

async function removeFull(url: string, key: string, fields: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/api/v1/remove`, {
    method: 'POST', headers: bearer(key), body: upload(await fs.readFile(FIXTURE), { size: 'full', quality: 'best', format: 'png', ...fields }),
  });
}

t.test('serve --upstream a cutout model-server: binary tensors, the same cutout as local, health says upstream', async (t) => {
  const upstream = await startModelServer(t);
  const v2 = (await (await fetch(`${upstream.url}/v2`)).json()) as any;
  t.ok(v2.extensions.includes('binary_tensor_data'), 'the model server offers the binary extension');
  const srv = await startServe(t, ['--upstream', upstream.url, '--workers', '1']);
  const key = await createKey(srv.dataDir);

  const health = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
  t.equal(health.inference, 'upstream');
  t.same({ url: health.upstream.url, binary: health.upstream.binary, ready: health.upstream.ready }, { url: upstream.url, binary: true, ready: true });
  t.same(health.upstream.sides, [512, 768, 1024], 'the quality variants are served as NAME-SIDE');

  const res = await removeFull(srv.url, key.key);
  t.equal(res.status, 200, 'removed through the upstream');
  t.equal(res.headers.get('x-credits-charged'), '1');
  await compareWithLocal(t, Buffer.from(await res.arrayBuffer()), 'fp32');

  const fast = await removeFull(srv.url, key.key, { quality: 'fast', size: 'preview' });
  t.equal(fast.status, 200, 'quality=fast runs on isnet-medium-512 on the upstream');
});

t.test('serve --upstream a minimal JSON-only protocol server: JSON tensors, one output asked for, the same cutout', async (t) => {
  const minimal = await startMinimalOip(t);
  // Credentials in the URL travel as Basic authentication and never show in health.
  const withCredentials = minimal.url.replace('http://', 'http://ops:s%40cret@');
  const srv = await startServe(t, ['--upstream', withCredentials, '--workers', '1']);
  const key = await createKey(srv.dataDir);
  const health = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
  t.equal(health.inference, 'upstream');
  t.equal(health.upstream.url, minimal.url, 'the URL without credentials');
  t.equal(health.upstream.ready, true);
  t.equal(health.upstream.binary, false, 'no binary extension listed: JSON tensors');
  t.same(health.upstream.sides, [1024], 'no NAME-SIDE models on this server');

  const res = await removeFull(srv.url, key.key);
  t.equal(res.status, 200, 'removed through the JSON upstream');
  await compareWithLocal(t, Buffer.from(await res.arrayBuffer()), 'fp32');
  t.equal(minimal.seen.length, 1, 'one inference request');
  const [request] = minimal.seen;
  t.match(request.contentType, /^application\/json/);
  t.equal(request.headerLength, undefined, 'no Inference-Header-Content-Length');
  t.equal(request.acceptEncoding, 'identity', 'no gzip asked for: tensors barely compress');
  t.same(request.inputs, [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', hasParameters: false }]);
  t.same(request.outputs, [{ name: 'output' }], 'only the output the pipeline reads');
  const basic = `Basic ${Buffer.from('ops:s@cret').toString('base64')}`;
  t.ok(minimal.requests.length >= 3 && minimal.requests.every((r) => r.authorization === basic), 'every request authenticated');
  const connections = new Set(minimal.requests.map((r) => r.clientPort));
  t.ok(connections.size < minimal.requests.length, `keep-alive: ${minimal.requests.length} requests on ${connections.size} connection(s)`);

  // The quality's side is not on the upstream: refused, nothing charged.
  const before = await balanceOf(srv.url, key.key);
  const fast = await errorCode(await removeFull(srv.url, key.key, { quality: 'fast', size: 'preview' }));
  t.equal(fast.status, 400);
  t.equal(fast.code, 'invalid_request');
  t.match(fast.message, /isnet-medium-512/);
  t.equal(await balanceOf(srv.url, key.key), before, 'nothing charged');
  t.equal(minimal.seen.length, 1, 'nothing sent upstream for it');

  // int8 is the local model's; the upstream serves the weights it was given.
  const int8 = await errorCode(await removeFull(srv.url, key.key, { precision: 'int8' }));
  t.same([int8.status, int8.code], [400, 'invalid_request'], 'precision=int8 under --upstream is refused');
  t.match(int8.message, /precision=int8/);
  t.equal(await balanceOf(srv.url, key.key), before, 'nothing charged for it');
  t.equal(minimal.seen.length, 1, 'nothing sent upstream for it either');

  // A job or a batch asking for int8 is refused at submission, as the sync route refuses it: never
  // accepted (202) to fail later.
  const job = await errorCode(await fetch(`${srv.url}/api/v1/jobs`, {
    method: 'POST', headers: bearer(key.key), body: upload(await fs.readFile(FIXTURE), { size: 'full', precision: 'int8' }),
  }));
  t.same([job.status, job.code], [400, 'invalid_request'], 'a job with precision=int8 is refused');
  t.match(job.message, /precision=int8/);
  const image64 = (await fs.readFile(FIXTURE)).toString('base64');
  const batch = await errorCode(await fetch(`${srv.url}/api/v1/jobs/batch`, {
    method: 'POST', headers: { ...bearer(key.key), 'Content-Type': 'application/json' },
    body: JSON.stringify({ images: [{ image_file_b64: image64 }, { image_file_b64: image64, precision: 'int8' }] }),
  }));
  t.same([batch.status, batch.code], [400, 'invalid_request'], 'a batch with an int8 item is refused whole');
  t.match(batch.message, /precision=int8/);
  const counts = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
  t.equal(counts.queue?.queued ?? 0, 0, 'nothing was queued');
  t.equal(minimal.seen.length, 1, 'and nothing sent upstream');
});

t.test('serve --upstream --precision int8 asks for the -int8 models: works against model-server --precision int8, with its token', async (t) => {
  const upstream = await startModelServer(t, ['--port', '0', '--precision', 'int8', '--token', 'gpu-secret']);
  const srv = await startServe(t, ['--upstream', upstream.url, '--workers', '1', '--precision', 'int8', '--upstream-token', 'gpu-secret']);
  const key = await createKey(srv.dataDir);
  const health = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
  t.same(health.upstream.sides, [768, 1024], 'isnet-medium-int8 and isnet-medium-768-int8 (512 has no int8 copy)');
  const res = await removeFull(srv.url, key.key);
  t.equal(res.status, 200, 'removed through the int8 upstream');
  await compareWithLocal(t, Buffer.from(await res.arrayBuffer()), 'int8');
  const balanced = await removeFull(srv.url, key.key, { quality: 'balanced', size: 'preview' });
  t.equal(balanced.status, 200, 'quality=balanced runs on isnet-medium-768-int8');
  const fast = await errorCode(await removeFull(srv.url, key.key, { quality: 'fast', size: 'preview' }));
  t.same([fast.status, fast.code], [400, 'invalid_request'], 'quality=fast: no isnet-medium-512-int8, refused');
  t.match(fast.message, /isnet-medium-512-int8/);

  // The same upstream without the token (CUTOUT_UPSTREAM_TOKEN unset): refused at start, one line.
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-token-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const without = await runCli(['serve', '--port', '0', '--data', dir, '--upstream', upstream.url, '--precision', 'int8'], { env: { CUTOUT_UPSTREAM_TOKEN: '' } });
  t.equal(without.code, 2, 'exit code 2');
  t.equal(without.stderr.trim().split('\n').length, 1, 'one line');
  t.match(without.stderr, /refused the credentials: GET \/v2 answered 401; give its token with --upstream-token/);
  // The token by its variable.
  const byEnv = await startServe(t, ['--upstream', upstream.url, '--workers', '1'], { env: { CUTOUT_UPSTREAM_TOKEN: 'gpu-secret', CUTOUT_PRECISION: 'int8' } });
  t.equal(((await (await fetch(`${byEnv.url}/api/v1/health`)).json()) as any).upstream.ready, true, 'CUTOUT_UPSTREAM_TOKEN and CUTOUT_PRECISION');
  t.notOk(srv.stderr().includes('gpu-secret') || byEnv.stderr().includes('gpu-secret'), 'the token is never logged');
});

t.test('serve --upstream with precision int8 and an upstream without the -int8 model refuses to start: one line, exit code 2', async (t) => {
  const minimal = await startMinimalOip(t);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-int8-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const r = await runCli(['serve', '--port', '0', '--upstream', minimal.url, '--data', dir], {
    env: { CUTOUT_PRECISION: 'int8' },
  });
  t.equal(r.code, 2, 'the usage exit code');
  t.equal(r.stderr.trim().split('\n').length, 1, 'one line');
  t.match(r.stderr, /has no model "isnet-medium-int8".*precision int8 asks for the int8 copy/);
  t.ok(minimal.requests.some((q) => q.path === '/v2/models/isnet-medium-int8'), 'the int8 name was asked for');
  t.notOk(minimal.requests.some((q) => q.path === '/v2/models/isnet-medium'), 'never the fp32 one in its place');
});

t.test('an upstream answering 503 gives 503 gpu_unavailable, a 500 or 4xx 500 processing_failed, a slow one the sync 504; none charged', async (t) => {
  const minimal = await startMinimalOip(t);
  const srv = await startServe(t, ['--upstream', minimal.url, '--workers', '1', '--sync-timeout', '3000']);
  const key = await createKey(srv.dataDir);

  minimal.failure.status = 503;
  const res503 = await removeFull(srv.url, key.key);
  const retryAfter = res503.headers.get('retry-after');
  const e503 = await errorCode(res503);
  t.same([e503.status, e503.code], [503, 'gpu_unavailable']);
  t.match(e503.message, /answered 503/);
  t.equal(retryAfter, '5', 'Retry-After');
  const health = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
  t.equal(health.upstream.ready, false, 'a failed call marks the upstream not ready until the next probe');

  // A 500 is the model failing on this input (Triton, KServe): not an outage, not retried.
  minimal.failure.status = 500;
  const res500 = await removeFull(srv.url, key.key);
  t.equal(res500.headers.get('retry-after'), null, 'no Retry-After for a model failure');
  const e500 = await errorCode(res500);
  t.same([e500.status, e500.code], [500, 'processing_failed'], 'the model failed on this image');
  t.match(e500.message, /^The inference server failed on this image \(500\)/, 'a generic message');
  t.notMatch(e500.message, /failing on purpose/, "the upstream's own text (onnxruntime's, say) is not shown to the client");
  t.match(srv.stderr(), /upstream POST http:\/\/127\.0\.0\.1:\d+\/v2\/models\/isnet-medium\/infer answered 500: failing on purpose with 500/, "it is in the server's log, with the model and URL");

  // A 200 longer than any matte of this size: cut off as it streams, uncharged.
  minimal.failure.status = undefined;
  minimal.failure.oversizeBytes = 200 * 1_000_000;
  const huge = await errorCode(await removeFull(srv.url, key.key));
  t.same([huge.status, huge.code], [500, 'processing_failed'], 'an oversized answer fails the request');
  t.match(huge.message, /longer than 26\.3 MB/, 'the JSON limit of a 1024 px matte');
  minimal.failure.oversizeBytes = undefined;

  minimal.failure.status = 400;
  const e400 = await errorCode(await removeFull(srv.url, key.key));
  t.same([e400.status, e400.code], [500, 'processing_failed'], 'our request did not fit the model: not retried');

  minimal.failure.status = undefined;
  minimal.failure.delayMs = 6000;
  const started = Date.now();
  const slow = await errorCode(await removeFull(srv.url, key.key));
  const ms = Date.now() - started;
  t.same([slow.status, slow.code], [504, 'processing_failed'], 'the upstream time counts against the sync deadline');
  t.ok(ms < 5500, `answered at the 3 s deadline, not after the upstream (${ms} ms)`);
  t.equal(await balanceOf(srv.url, key.key), 10, 'nothing charged');
});

t.test('a job whose upstream answers 500 ends failed, uncharged, and the next job still runs', async (t) => {
  const minimal = await startMinimalOip(t);
  const srv = await startServe(t, ['--upstream', minimal.url, '--workers', '1']);
  const key = await createKey(srv.dataDir);
  const image = await fs.readFile(FIXTURE);
  // The first inference fails with 500 (the model raised on it), the ones after run the model.
  minimal.failure.status = 500;
  minimal.failure.times = 1;
  const submit = async () => {
    const res = await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key.key), body: upload(image, { size: 'full', format: 'png' }) });
    t.equal(res.status, 202);
    return ((await res.json()) as any).job_id as string;
  };
  const first = await submit();
  const second = await submit();
  // The minimal server runs the model in this process and blocks its event loop for seconds: a
  // kept-alive connection can pass serve's keep-alive timeout meanwhile and be closed under a
  // poll ("other side closed"), which is the test's own doing; such a poll is made again.
  const poll = async (id: string): Promise<any> => {
    try {
      return await (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key.key) })).json();
    } catch (err) {
      if ((err as { cause?: { code?: string } }).cause?.code !== 'UND_ERR_SOCKET') throw err;
      return (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key.key) })).json();
    }
  };
  const settle = async (id: string) => {
    for (let until = Date.now() + 90_000; Date.now() < until;) {
      const job = await poll(id);
      if (job.status === 'done' || job.status === 'failed') return job;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`job ${id} did not settle`);
  };
  const a = await settle(first);
  t.equal(a.status, 'failed', 'a 500 fails the job: not requeued');
  t.equal(a.error?.code, 'processing_failed');
  const b = await settle(second);
  t.equal(b.status, 'done', 'the next job is not stalled behind it');
  t.equal(await balanceOf(srv.url, key.key), 9, 'only the job that was done is charged');
  t.equal(minimal.failure.times, 0, 'the failing answer was used');
  t.notMatch(srv.stderr(), /back in the queue/, 'no outage requeue');
});
