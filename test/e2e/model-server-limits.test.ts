/**
 * The model server's bounds, in process with small limits so that they are reached quickly: the
 * queue behind the slots (503 with Retry-After only once it is full), the body deadline (408),
 * the headers deadline, and the budget of request bodies held at once (503). The real model
 * through a pipeline object's loadModel/runModel (the worker thread); real HTTP on a free port.
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { LIMITS } from '../../src/limits.js';
import { resolveModel } from '../../src/toolchain/manifest.js';
import { createPipeline } from '../../src/pipeline/index.js';
import { modelsToServe, pipelineModel, startModelServer, type ModelServer } from '../../src/oip/server.js';

const SIDE = 1024;
const INPUT_ELEMENTS = 3 * SIDE * SIDE;
const manifest = resolveModel('isnet-medium');
const pipeline = createPipeline({ precision: 'fp32' });

function binaryBody(): { body: Buffer; headers: Record<string, string> } {
  const tensor = new Float32Array(INPUT_ELEMENTS);
  const json = Buffer.from(JSON.stringify({ inputs: [{ name: 'input', shape: [1, 3, SIDE, SIDE], datatype: 'FP32', parameters: { binary_data_size: tensor.byteLength } }], outputs: [{ name: 'output', parameters: { binary_data: true } }] }));
  return {
    body: Buffer.concat([json, Buffer.from(tensor.buffer)]),
    headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(json.length) },
  };
}

async function start(t: Tap.Test, limits: Parameters<typeof startModelServer>[0]['limits']): Promise<ModelServer> {
  const server = await startModelServer({
    host: '127.0.0.1', port: 0, manifest, model: pipelineModel(pipeline), version: 'test',
    models: modelsToServe(manifest, 'fp32', [], () => 'fp32'), limits,
  });
  t.teardown(() => server.close());
  return server;
}

const { body, headers } = binaryBody();
const infer = async (url: string) => {
  const res = await fetch(`${url}/v2/models/isnet-medium/infer`, { method: 'POST', headers, body });
  const text = Buffer.from(await res.arrayBuffer());
  return { status: res.status, retryAfter: res.headers.get('retry-after'), error: res.status === 200 ? null : (JSON.parse(text.toString()).error as string) };
};

/** A request that sends `bytes` of its body and then nothing; its answer, if any, is kept. */
function stall(url: string, bytes: number) {
  let answer: { status: number; body: string; at: number } | null = null;
  let closed = false;
  const req = http.request(`${url}/v2/models/isnet-medium/infer`, { method: 'POST', headers: { ...headers, 'Content-Length': String(body.length) } }, (res) => {
    let text = '';
    res.on('data', (d: Buffer) => (text += d.toString()));
    res.on('end', () => (answer = { status: res.statusCode!, body: text, at: Date.now() }));
  });
  req.on('error', () => undefined);
  req.on('close', () => (closed = true));
  req.write(body.subarray(0, bytes));
  return { req, answer: () => answer, closed: () => closed };
}

t.teardown(() => pipeline.close());

t.test('a bounded queue behind the slots: 503 with Retry-After only once it is full', async (t) => {
  const server = await start(t, { maxInferences: 1, maxQueue: 1 });
  // One runs, one waits for its slot, the third finds the queue full.
  const results = await Promise.all([infer(server.url), infer(server.url), infer(server.url)]);
  const statuses = results.map((r) => r.status).sort();
  t.same(statuses, [200, 200, 503], 'two answered, one refused');
  const busy = results.find((r) => r.status === 503)!;
  t.equal(busy.retryAfter, String(LIMITS.modelServerRetryAfterSeconds), 'Retry-After');
  t.match(busy.error, /busy: 1 running and 1 waiting for a slot/);
  t.same((await Promise.all([infer(server.url), infer(server.url)])).map((r) => r.status), [200, 200], 'within the queue: all answered');
});

t.test('the body deadline: half a body and silence gets 408 and a closed connection; others are served meanwhile', async (t) => {
  const server = await start(t, { bodyTimeoutMs: 1500 });
  const started = Date.now();
  const stalled = stall(server.url, body.length >> 1);
  const normal = await infer(server.url);
  t.equal(normal.status, 200, 'a normal infer meanwhile');
  while (!stalled.closed() && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 50));
  const answer = stalled.answer() as { status: number; body: string; at: number } | null;
  t.ok(answer, 'the stalled client got an answer');
  t.equal(answer?.status, 408);
  t.match(JSON.parse(answer?.body ?? '{}').error, /not complete within 1.5 s/);
  t.ok(stalled.closed(), 'and its connection was closed');
  t.ok(answer!.at - started < 8000, `within the deadline and the time of one inference (${answer!.at - started} ms)`);
});

t.test('the headers deadline: a client that never finishes its headers is cut off', async (t) => {
  const server = await start(t, { headersTimeoutMs: 1000, bodyTimeoutMs: 2000 });
  const { port } = new URL(server.url);
  const started = Date.now();
  const text = await new Promise<string>((resolve) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write('POST /v2/models/isnet-medium/infer HTTP/1.1\r\nHost: x\r\n'));
    let got = '';
    socket.on('data', (d) => (got += d.toString()));
    socket.on('close', () => resolve(got));
    socket.on('error', () => undefined);
  });
  const ms = Date.now() - started;
  t.match(text, /^HTTP\/1.1 408/, 'node answers 408');
  t.ok(ms < 4000, `closed within the deadline and one check interval (${ms} ms)`);
});

t.test('the budget of bodies held: past it, 503 with Retry-After; freed when the stalled clients go', async (t) => {
  const server = await start(t, { bodyBudgetBytes: 20_000_000 });
  const stalled = [stall(server.url, 8_000_000), stall(server.url, 8_000_000)];
  await new Promise((r) => setTimeout(r, 500));
  const refused = await infer(server.url);
  t.equal(refused.status, 503, 'a body that would go over the budget');
  t.equal(refused.retryAfter, String(LIMITS.modelServerRetryAfterSeconds));
  t.match(refused.error, /of request bodies held, the limit is 20 MB/);
  for (const s of stalled) s.req.destroy();
  await new Promise((r) => setTimeout(r, 300));
  t.equal((await infer(server.url)).status, 200, 'the stalled bodies gave their bytes back');
});
