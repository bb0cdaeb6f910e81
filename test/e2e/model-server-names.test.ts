/**
 * `cutout model-server` serves what its names say: `isnet-medium` is the fp32 model (the weights
 * `models export --triton` writes) whatever `--precision`, its int8 copy is `isnet-medium-int8`;
 * the token guards every endpoint but health; the server reads its own host and port variables,
 * never serve's. Real processes on loopback, the real model; the fp32 reference is onnxruntime
 * run here on the verified fp32 file.
 */
import t from 'tap';
import net from 'node:net';
import * as ort from 'onnxruntime-node';
import { resolveModel } from '../../src/toolchain/manifest.js';
import { ensureRunnableModel } from '../../src/toolchain/weights.js';
import { int8Sides, resolvePrecision } from '../../src/toolchain/int8.js';
import { modelsToServe } from '../../src/oip/server.js';
import { freePort, startListening } from '../helpers/process.js';

const SIDE = 1024;
const INPUT_ELEMENTS = 3 * SIDE * SIDE;
const manifest = resolveModel('isnet-medium');

/** A grey image with a bright square and a gradient, as the pipeline would prepare it. */
function testTensor(): Float32Array {
  const data = new Float32Array(INPUT_ELEMENTS);
  for (let c = 0; c < 3; c++) {
    for (let y = 0; y < SIDE; y++) {
      for (let x = 0; x < SIDE; x++) data[c * SIDE * SIDE + y * SIDE + x] = (x / SIDE - 0.5) * 0.2 + (c - 1) * 0.05;
    }
    for (let y = 300; y < 700; y++) data.fill(0.45, c * SIDE * SIDE + y * SIDE + 350, c * SIDE * SIDE + y * SIDE + 680);
  }
  return data;
}

async function infer(url: string, model: string, tensor: Float32Array, headers: Record<string, string> = {}): Promise<{ status: number; matte: Float32Array | null; body: any }> {
  const json = Buffer.from(JSON.stringify({
    inputs: [{ name: 'input', shape: [1, 3, SIDE, SIDE], datatype: 'FP32', parameters: { binary_data_size: tensor.byteLength } }],
    outputs: [{ name: 'output', parameters: { binary_data: true } }],
  }));
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(json.length), ...headers },
    body: Buffer.concat([json, Buffer.from(tensor.buffer, tensor.byteOffset, tensor.byteLength)]),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) return { status: res.status, matte: null, body: JSON.parse(bytes.toString()) };
  const length = Number(res.headers.get('inference-header-content-length'));
  const copy = new Uint8Array(bytes.subarray(length));
  return { status: 200, matte: new Float32Array(copy.buffer), body: JSON.parse(bytes.subarray(0, length).toString()) };
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

const status = async (url: string, path: string, headers: Record<string, string> = {}) => (await fetch(`${url}${path}`, { headers })).status;

t.test('names say what runs: isnet-medium is fp32 under every --precision, int8 is isnet-medium-int8', async (t) => {
  const tensor = testTensor();
  // The fp32 reference: onnxruntime on the verified fp32 file, as Triton runs the exported one.
  const session = await ort.InferenceSession.create(await ensureRunnableModel(manifest), { intraOpNumThreads: 2 });
  const reference = (await session.run({ input: new ort.Tensor('float32', tensor.slice(), [1, 3, SIDE, SIDE]) }, ['output'])).output.data as Float32Array;
  await session.release();

  await t.test('--precision int8: the int8 copies under -int8 names, and nothing under the fp32 names', async (t) => {
    const server = await startListening(t, ['model-server', '--port', '0', '--precision', 'int8'], { timeoutMs: 120_000 });
    t.equal(await status(server.url, '/v2/models/isnet-medium-int8'), 200, 'isnet-medium-int8 exists');
    const meta = (await (await fetch(`${server.url}/v2/models/isnet-medium-int8`)).json()) as any;
    t.same([meta.name, meta.inputs[0].datatype, meta.inputs[0].shape], ['isnet-medium-int8', 'FP32', [1, 3, 1024, 1024]], 'FP32 tensors in and out: int8 is inside');
    t.equal(await status(server.url, '/v2/models/isnet-medium-768-int8'), 200, "balanced's side has its int8 copy");
    t.equal(await status(server.url, '/v2/models/isnet-medium'), 404, 'the fp32 name is not answered with int8 weights');
    t.equal(await status(server.url, '/v2/models/isnet-medium-512-int8'), 404, "fast's side has no int8 copy (int8Sides)");
    const int8 = await infer(server.url, 'isnet-medium-int8', tensor);
    t.equal(int8.status, 200);
    t.equal(int8.body.model_name, 'isnet-medium-int8');
    const d = maxDiff(int8.matte!, reference);
    t.ok(d > 1e-3, `the int8 answer is not the fp32 one (max difference ${d.toFixed(4)})`);
    await server.stop();
  });

  await t.test('--precision fp32: isnet-medium answers as the fp32 weights do', async (t) => {
    const server = await startListening(t, ['model-server', '--port', '0', '--precision', 'fp32'], { timeoutMs: 120_000 });
    t.equal(await status(server.url, '/v2/models/isnet-medium-int8'), 404, 'no int8 name');
    t.equal(await status(server.url, '/v2/models/isnet-medium-512'), 200);
    const fp32 = await infer(server.url, 'isnet-medium', tensor);
    t.equal(fp32.status, 200);
    const d = maxDiff(fp32.matte!, reference);
    t.ok(d < 1e-3, `within 1e-3 of onnxruntime on the fp32 file (max difference ${d.toExponential(2)})`);
    await server.stop();
  });

  await t.test('--precision auto (default): isnet-medium is fp32 whatever this CPU is; auto\'s own pick under its own name', async (t) => {
    const server = await startListening(t, ['model-server', '--port', '0'], { timeoutMs: 120_000 });
    const expected = modelsToServe(manifest, 'auto', int8Sides(manifest), (side) => resolvePrecision(manifest, 'auto', side)).map((m) => m.name);
    t.ok(expected.includes('isnet-medium'), 'auto serves the fp32 names too');
    for (const name of expected) t.equal(await status(server.url, `/v2/models/${name}`), 200, `${name} served`);
    t.match(server.stderr(), new RegExp(`serving ${expected.join(', ')}`), 'the names served are logged at start');
    const auto = await infer(server.url, 'isnet-medium', tensor);
    const d = maxDiff(auto.matte!, reference);
    t.ok(d < 1e-3, `isnet-medium under auto is fp32 (max difference ${d.toExponential(2)})`);
    await server.stop();
  });
});

t.test('the token: every endpoint but /v2/health/* needs it, compared whole; set by flag or CUTOUT_MODEL_SERVER_TOKEN', async (t) => {
  const server = await startListening(t, ['model-server', '--port', '0', '--precision', 'fp32'], {
    timeoutMs: 120_000, env: { ...process.env, CUTOUT_MODEL_SERVER_TOKEN: 's3cret-token' },
  });
  const right = { Authorization: 'Bearer s3cret-token' };
  t.equal(await status(server.url, '/v2/health/live'), 200, 'liveness is open');
  t.equal(await status(server.url, '/v2/health/ready'), 200, 'readiness is open');
  for (const path of ['/v2', '/v2/models/isnet-medium', '/v2/models/isnet-medium/ready', '/v2/models/nope']) {
    t.equal(await status(server.url, path), 401, `${path} without a token: 401`);
    t.equal(await status(server.url, path, { Authorization: 'Bearer s3cret-toke' }), 401, `${path} with a wrong token: 401`);
    t.equal(await status(server.url, path, { Authorization: 'Bearer s3cret-token-and-more' }), 401, `${path} with a longer token: 401`);
    t.equal(await status(server.url, path, { Authorization: 'Basic czNjcmV0LXRva2Vu' }), 401, `${path} with Basic: 401`);
  }
  const refused = await fetch(`${server.url}/v2`);
  t.equal(refused.headers.get('www-authenticate'), 'Bearer');
  t.match(((await refused.json()) as any).error, /Authorization: Bearer/, '{"error": ...}');
  t.equal(await status(server.url, '/v2', right), 200, 'the right token: 200');
  t.equal(await status(server.url, '/v2/models/isnet-medium', right), 200);
  const tensor = testTensor();
  const without = await infer(server.url, 'isnet-medium', tensor);
  t.equal(without.status, 401, 'an inference without the token: 401');
  const wrong = await infer(server.url, 'isnet-medium', tensor, { Authorization: 'Bearer nope' });
  t.equal(wrong.status, 401, 'an inference with a wrong token: 401');
  const ok = await infer(server.url, 'isnet-medium', tensor, right);
  t.equal(ok.status, 200, 'an inference with the token: 200');
  t.notOk(server.stderr().includes('s3cret-token'), 'the token is never logged');
});

t.test('model-server reads CUTOUT_MODEL_SERVER_HOST/PORT, never serve\'s CUTOUT_HOST/CUTOUT_PORT', async (t) => {
  // serve's port is taken: a model server that read CUTOUT_PORT could not start.
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const servePort = (taken.address() as net.AddressInfo).port;
  const own = await freePort();
  const server = await startListening(t, ['model-server', '--precision', 'fp32'], {
    timeoutMs: 120_000, env: { ...process.env, CUTOUT_PORT: String(servePort), CUTOUT_HOST: '0.0.0.0', CUTOUT_MODEL_SERVER_PORT: String(own) },
  });
  t.equal(server.url, `http://127.0.0.1:${own}`, 'its own port, and its own default host (not serve\'s 0.0.0.0)');
  t.equal(await status(server.url, '/v2/health/ready'), 200);
  await server.stop();

  const host = await startListening(t, ['model-server', '--precision', 'fp32', '--port', '0'], {
    timeoutMs: 120_000, env: { ...process.env, CUTOUT_HOST: '0.0.0.0', CUTOUT_MODEL_SERVER_HOST: '127.0.0.1' },
  });
  t.match(host.url, /^http:\/\/127\.0\.0\.1:\d+$/, 'CUTOUT_MODEL_SERVER_HOST');
  await host.stop();
});
