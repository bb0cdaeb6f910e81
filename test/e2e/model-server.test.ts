/**
 * `cutout model-server` speaks the Open Inference Protocol v2: metadata, health, JSON and binary
 * inference, and its errors (`{"error": ...}`, 4xx for the client's mistakes). `serve --upstream`
 * refuses at start an upstream whose model does not fit. `models export --triton` writes a Triton
 * repository. Real processes on loopback, the real model.
 */
import t from 'tap';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { LIMITS, inferBodyLimit } from '../../src/limits.js';
import { resolveModel } from '../../src/toolchain/manifest.js';
import { ensureRunnableModel } from '../../src/toolchain/weights.js';
import { runCli } from '../helpers/cli.js';
import { startMinimalOip } from '../helpers/minimal-oip.js';
import { freePort, startModelServer } from '../helpers/model-server.js';

const SIDE = 1024;
const INPUT_ELEMENTS = 3 * SIDE * SIDE;

/** A grey image as the pipeline would prepare it ((128 - 128) / 256 = 0), with a bright square. */
function testTensor(): Float32Array {
  const data = new Float32Array(INPUT_ELEMENTS);
  for (let c = 0; c < 3; c++) for (let y = 384; y < 640; y++) data.fill(0.45, c * SIDE * SIDE + y * SIDE + 384, c * SIDE * SIDE + y * SIDE + 640);
  return data;
}

/** `align`: pad the JSON header with spaces so that the binary part starts at this offset modulo 4. */
function binaryRequest(header: unknown, tensor: Float32Array, align?: number): { body: Buffer; headers: Record<string, string> } {
  let text = JSON.stringify(header);
  if (align !== undefined) while (text.length % 4 !== align) text += ' ';
  const json = Buffer.from(text);
  return {
    body: Buffer.concat([json, Buffer.from(tensor.buffer, tensor.byteOffset, tensor.byteLength)]),
    headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(json.length) },
  };
}

t.test('model-server: metadata, health, binary and JSON inference, protocol errors', async (t) => {
  const server = await startModelServer(t);
  const get = async (p: string) => {
    const res = await fetch(`${server.url}${p}`);
    return { status: res.status, body: (await res.json()) as any };
  };
  const v2 = await get('/v2');
  t.equal(v2.status, 200);
  t.same(v2.body.extensions, ['binary_tensor_data']);
  t.equal((await get('/v2/health/live')).status, 200);
  t.equal((await get('/v2/health/ready')).status, 200);
  t.equal((await get('/v2/models/isnet-medium/ready')).status, 200);
  const meta = await get('/v2/models/isnet-medium');
  t.same(meta.body, {
    name: 'isnet-medium', versions: ['1'], platform: 'onnxruntime_onnx',
    inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 3, 1024, 1024] }],
    outputs: [{ name: 'output', datatype: 'FP32', shape: [1, 1, 1024, 1024] }],
  });
  t.same((await get('/v2/models/isnet-medium-512')).body.inputs[0].shape, [1, 3, 512, 512], 'a quality variant as NAME-SIDE');
  t.equal((await get('/v2/models/isnet-medium/versions/1')).status, 200, 'the versioned path');

  const infer = (body: NonNullable<RequestInit['body']>, headers: Record<string, string> = { 'Content-Type': 'application/json' }, model = 'isnet-medium') =>
    fetch(`${server.url}/v2/models/${model}/infer`, { method: 'POST', headers, body });
  const fails = async (t: Tap.Test, res: Response, status: number, pattern: RegExp) => {
    t.equal(res.status, status, `status ${status}`);
    const body = (await res.json()) as any;
    t.equal(typeof body.error, 'string', '{"error": "..."}');
    t.match(body.error, pattern);
  };

  await t.test('errors', async (t) => {
    await fails(t, await fetch(`${server.url}/v2/models/nope`), 404, /unknown model "nope"/);
    await fails(t, await fetch(`${server.url}/v2/models/bad%zz`), 400, /malformed model name in the path: bad%zz/);
    await fails(t, await infer('{}', undefined, 'nope'), 404, /unknown model "nope"/);
    await fails(t, await infer('{"inputs": [{"name": "input", '), 400, /malformed/);
    await fails(t, await infer('{"inputs": 3}'), 400, /inputs/);
    await fails(t, await infer(JSON.stringify({ inputs: [{ name: 'image', shape: [1, 3, 1024, 1024], datatype: 'FP32', data: [] }] })), 400, /one input, "input"/);
    await fails(t, await infer(JSON.stringify({ inputs: [{ name: 'input', shape: [1, 3, 512, 512], datatype: 'FP32', data: [] }] })), 400, /shape \[1, 3, 1024, 1024\]/);
    await fails(t, await infer(JSON.stringify({ inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP16', data: [] }] })), 400, /must be FP32, got FP16/);
    await fails(t, await infer(JSON.stringify({ inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', data: [1, 2, 3] }] })), 400, /3 elements/);
    const short = binaryRequest({ inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', parameters: { binary_data_size: INPUT_ELEMENTS * 4 } }] }, new Float32Array(10));
    await fails(t, await infer(short.body, short.headers), 400, /binary/);
    const wrongOutput = binaryRequest({ inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', parameters: { binary_data_size: INPUT_ELEMENTS * 4 } }], outputs: [{ name: '1890' }] }, testTensor());
    await fails(t, await infer(wrongOutput.body, wrongOutput.headers), 400, /unknown output "1890"/);

    // Each output at most once: 50 copies of "output" were answered with 210 MB (every copy built).
    const input = [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', parameters: { binary_data_size: INPUT_ELEMENTS * 4 } }];
    const duplicated = binaryRequest({ inputs: input, outputs: Array.from({ length: 50 }, () => ({ name: 'output', parameters: { binary_data: true } })) }, testTensor());
    await fails(t, await infer(duplicated.body, duplicated.headers), 400, /output "output" is asked for 50 times/);
    const twice = binaryRequest({ inputs: input, outputs: [{ name: 'output' }, { name: 'output', parameters: { binary_data: true } }] }, testTensor());
    await fails(t, await infer(twice.body, twice.headers), 400, /asked for 2 times/);
    const mixed = binaryRequest({ inputs: input, outputs: [{ name: 'output' }, { name: '1890' }] }, testTensor());
    await fails(t, await infer(mixed.body, mixed.headers), 400, /unknown output "1890"/);
    const notObject = binaryRequest({ inputs: input, outputs: [null] }, testTensor());
    await fails(t, await infer(notObject.body, notObject.headers), 400, /unknown output/);
    const longId = binaryRequest({ id: 'x'.repeat(10_000), inputs: input }, testTensor());
    await fails(t, await infer(longId.body, longId.headers), 400, /"id" must be a string of at most 256 characters/);

    // A body over what the model's tensor can take is refused from its Content-Length, before it
    // is read: JSON at 25 bytes an element, binary at 4, each plus 64 KB for the header.
    const declare = (length: number, headers: Record<string, string>) => new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${server.url}/v2/models/isnet-medium/infer`, { method: 'POST', headers: { ...headers, 'Content-Length': String(length) } }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.write('{"inputs": [');
    });
    const jsonLimit = inferBodyLimit(INPUT_ELEMENTS, 'json');
    t.equal(jsonLimit, INPUT_ELEMENTS * 25 + 64 * 1024);
    const over = await declare(jsonLimit + 1, { 'Content-Type': 'application/json' });
    t.equal(over.status, 413);
    t.match(JSON.parse(over.body).error, /over the limit of 78.7 MB/);
    const overBinary = await declare(INPUT_ELEMENTS * 4 + 64 * 1024 + 1, { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': '100' });
    t.equal(overBinary.status, 413);
    t.match(JSON.parse(overBinary.body).error, /over the limit of 12.6 MB/);

    // Within the byte limit, the right shape, too many elements: 400 at the first one too many,
    // without a flattened copy; a body of tiny arrays is refused before it is parsed.
    const tooMany = `{"inputs": [{"name": "input", "shape": [1, 3, 1024, 1024], "datatype": "FP32", "data": [${'0,'.repeat(INPUT_ELEMENTS + 1000)}0]}]}`;
    await fails(t, await infer(tooMany), 400, /more than 3145728 elements/);
    const nested = `{"inputs": [{"name": "input", "shape": [1, 3, 1024, 1024], "datatype": "FP32", "data": [${'[0],'.repeat(4 * INPUT_ELEMENTS)}[0]]}]}`;
    t.ok(nested.length < jsonLimit, `a ${(nested.length / 1e6).toFixed(1)} MB body, under the byte limit`);
    await fails(t, await infer(nested), 400, /holds about \d+ values; model "isnet-medium" takes 3145728 elements/);
    t.equal((await get('/v2/health/ready')).status, 200, 'still serving');

  });

  await t.test('stalled uploads hold no inference slot: clients that send half a body and stall, then a normal infer', async (t) => {
    // Twice as many stalled clients as slots: before, the first four took every slot (the body was
    // read inside one) and the next request got 503 for up to node's 300 s request timeout.
    const { body, headers } = binaryRequest({ inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', parameters: { binary_data_size: INPUT_ELEMENTS * 4 } }] }, testTensor());
    const stalled = Array.from({ length: 2 * LIMITS.modelServerMaxInferences }, () => {
      const req = http.request(`${server.url}/v2/models/isnet-medium/infer`, { method: 'POST', headers: { ...headers, 'Content-Length': String(body.length) } });
      req.on('error', () => undefined);
      req.write(body.subarray(0, body.length >> 1));
      return req;
    });
    await new Promise((r) => setTimeout(r, 500));
    const started = Date.now();
    const normal = await infer(body, headers);
    t.equal(normal.status, 200, `a normal infer is answered (${Date.now() - started} ms)`);
    await normal.arrayBuffer();
    for (const req of stalled) req.destroy();
  });

  await t.test('twice as many concurrent infers as slots: all answered, none 503', async (t) => {
    const { body, headers } = binaryRequest({ inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', parameters: { binary_data_size: INPUT_ELEMENTS * 4 } }], outputs: [{ name: 'output', parameters: { binary_data: true } }] }, testTensor());
    const n = 2 * LIMITS.modelServerMaxInferences;
    const ms: number[] = [];
    const statuses = await Promise.all(Array.from({ length: n }, async () => {
      const started = Date.now();
      const res = await infer(body, headers);
      await res.arrayBuffer();
      ms.push(Date.now() - started);
      return res.status;
    }));
    t.same(statuses, Array(n).fill(200), `${n} concurrent infers, ${LIMITS.modelServerMaxInferences} slots: all 200 (${ms.sort((a, b) => a - b).join(', ')} ms)`);
  });

  await t.test('binary request, binary output per output and by binary_data_output', async (t) => {
    // The binary part once 4-byte aligned in the body, once not: both are read right.
    for (const [align, header] of [
      [0, { inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', parameters: { binary_data_size: INPUT_ELEMENTS * 4 } }], outputs: [{ name: 'output', parameters: { binary_data: true } }] }],
      [1, { id: 'r1', parameters: { binary_data_output: true }, inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', parameters: { binary_data_size: INPUT_ELEMENTS * 4 } }] }],
    ] as const) {
      const { body, headers } = binaryRequest(header, testTensor(), align);
      const res = await infer(body, headers);
      t.equal(res.status, 200);
      const length = Number(res.headers.get('inference-header-content-length'));
      const bytes = Buffer.from(await res.arrayBuffer());
      const json = JSON.parse(bytes.subarray(0, length).toString()) as any;
      t.equal(json.model_name, 'isnet-medium');
      if ('id' in header) t.equal(json.id, 'r1', 'the request id is echoed');
      t.same(json.outputs.map((o: any) => [o.name, o.datatype, o.shape, o.parameters.binary_data_size]), [['output', 'FP32', [1, 1, 1024, 1024], 1024 * 1024 * 4]]);
      t.equal(bytes.length - length, 1024 * 1024 * 4, 'the binary output follows the header');
      const copy = new Uint8Array(bytes.subarray(length));
      const matte = new Float32Array(copy.buffer);
      t.ok(matte[512 * 1024 + 512] > 0.5 && matte[10 * 1024 + 10] < 0.5, `the bright square is the subject (${matte[512 * 1024 + 512].toFixed(3)} inside, ${matte[10 * 1024 + 10].toFixed(3)} outside)`);
      t.type(json.parameters.cutout_inference_ms, 'number', 'the server reports its own inference time');
    }
  });

  await t.test('JSON request and JSON output', async (t) => {
    const res = await infer(JSON.stringify({ inputs: [{ name: 'input', shape: [1, 3, 1024, 1024], datatype: 'FP32', data: Array.from(testTensor()) }], outputs: [{ name: 'output' }] }));
    t.equal(res.status, 200);
    t.match(res.headers.get('content-type'), /application\/json/);
    t.equal(res.headers.get('inference-header-content-length'), null);
    const body = (await res.json()) as any;
    t.equal(body.outputs[0].data.length, 1024 * 1024);
    t.ok(body.outputs[0].data[512 * 1024 + 512] > 0.5);
  });

  const end = await server.stop('SIGTERM');
  t.same([end.code, end.signal], [0, null], 'SIGTERM stops it cleanly, exit code 0');
  t.match(server.stderr(), /SIGTERM, finishing inferences in flight/);
  t.notMatch(server.stderr(), /URIError|    at /, 'no stack trace on stderr');
});

t.test('serve --upstream refuses at start an upstream whose model does not fit', async (t) => {
  const data = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-mismatch-'));
  t.teardown(() => fs.rm(data, { recursive: true, force: true }));
  const serve = (upstream: string, ...more: string[]) => runCli(['serve', '--port', '0', '--data', data, '--upstream', upstream, ...more]);

  const wrongShape = await startMinimalOip(t, { inputShape: [1, 3, 512, 512] });
  const shape = await serve(wrongShape.url);
  t.equal(shape.code, 2, 'exit code 2, as a bad value');
  t.equal(shape.stderr.trim().split('\n').length, 1, 'one line');
  t.match(shape.stderr, /input "input" has shape \[1,3,512,512\], expected \[1, 3, 1024, 1024\]/);

  const wrongType = await startMinimalOip(t, { inputDatatype: 'FP16' });
  const type = await serve(wrongType.url);
  t.equal(type.code, 2);
  t.match(type.stderr, /input "input" is FP16, expected FP32/);

  const wildcard = await startMinimalOip(t, { inputShape: [-1, 3, -1, -1] });
  const other = await serve(wildcard.url, '--upstream-model', 'isnet-large');
  t.equal(other.code, 2);
  t.match(other.stderr, /has no model "isnet-large"/);
  t.equal(wildcard.seen.length, 0, 'nothing was inferred');

  const down = await serve(`http://127.0.0.1:${await freePort()}`);
  t.equal(down.code, 1, 'an unreachable upstream: exit 1');
  t.match(down.stderr, /^cutout serve: cannot reach the inference server at http:\/\/127\.0\.0\.1:\d+: connection refused\n$/, 'in start-up words (issue 29)');
});

t.test('models export --triton writes config.pbtxt and the verified fp32 model.onnx', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-triton-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const r = await runCli(['models', 'export', '--triton', dir, 'isnet-medium', '--no-variants']);
  t.equal(r.code, 0, r.stderr);
  const config = await fs.readFile(path.join(dir, 'isnet-medium', 'config.pbtxt'), 'utf8');
  t.equal(config, [
    'name: "isnet-medium"',
    'platform: "onnxruntime_onnx"',
    'max_batch_size: 0',
    'input [',
    '  {',
    '    name: "input"',
    '    data_type: TYPE_FP32',
    '    dims: [ 1, 3, 1024, 1024 ]',
    '  }',
    ']',
    'output [',
    '  {',
    '    name: "output"',
    '    data_type: TYPE_FP32',
    '    dims: [ 1, 1, 1024, 1024 ]',
    '  }',
    ']',
    '',
  ].join('\n'));
  const manifest = resolveModel('isnet-medium');
  const fp32 = await ensureRunnableModel(manifest);
  const recorded = (await fs.readFile(`${fp32}.sha256`, 'utf8')).trim();
  const hash = createHash('sha256');
  for await (const chunk of (await fs.open(path.join(dir, 'isnet-medium', '1', 'model.onnx'))).createReadStream()) hash.update(chunk as Buffer);
  const exported = hash.digest('hex');
  t.equal(exported, recorded, 'the sha256 of the verified fp32 file');
  t.not(exported, manifest.sha256, 'not the fp16 download');
  await t.resolves(fs.access(path.join(dir, 'isnet-medium-512')).then(() => { throw new Error('variants exported'); }, () => undefined), '--no-variants: no NAME-SIDE');

  // Exported again over the first: each file replaced by a rename, never written in place.
  const before = await fs.stat(path.join(dir, 'isnet-medium', 'config.pbtxt'));
  const again = await runCli(['models', 'export', '--triton', dir, 'isnet-medium', '--no-variants']);
  t.equal(again.code, 0, again.stderr);
  t.not((await fs.stat(path.join(dir, 'isnet-medium', 'config.pbtxt'))).ino, before.ino, 'config.pbtxt is a new file (temp file + rename)');
  t.same((await fs.readdir(path.join(dir, 'isnet-medium'))).sort(), ['1', 'config.pbtxt'], 'no temporary file left');
});

t.test('models export --triton does not write through a symbolic link', async (t) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-triton-link-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const victim = path.join(dir, 'victim.txt');
  await fs.writeFile(victim, 'precious\n');
  await fs.mkdir(path.join(dir, 'repo', 'isnet-medium', '1'), { recursive: true });

  // A link at config.pbtxt: before, the config was written into the file it points to.
  await fs.symlink(victim, path.join(dir, 'repo', 'isnet-medium', 'config.pbtxt'));
  const config = await runCli(['models', 'export', '--triton', path.join(dir, 'repo'), 'isnet-medium', '--no-variants']);
  t.equal(config.code, 2, 'refused as a bad value (exit 2)');
  t.equal(config.stderr.trim().split('\n').length, 1, 'one line');
  t.match(config.stderr, /config\.pbtxt is a symbolic link/);
  t.equal(await fs.readFile(victim, 'utf8'), 'precious\n', 'the link\'s target is untouched');
  await fs.rm(path.join(dir, 'repo', 'isnet-medium', 'config.pbtxt'));

  // A link at model.onnx: before, the weights were copied into what it points to.
  await fs.symlink(victim, path.join(dir, 'repo', 'isnet-medium', '1', 'model.onnx'));
  const model = await runCli(['models', 'export', '--triton', path.join(dir, 'repo'), 'isnet-medium', '--no-variants']);
  t.equal(model.code, 2);
  t.match(model.stderr, /model\.onnx is a symbolic link/);
  t.equal(await fs.readFile(victim, 'utf8'), 'precious\n', 'the link\'s target is untouched');
  await fs.rm(path.join(dir, 'repo', 'isnet-medium', '1', 'model.onnx'));

  // A link at the model's directory: not followed either.
  await fs.mkdir(path.join(dir, 'elsewhere'));
  await fs.symlink(path.join(dir, 'elsewhere'), path.join(dir, 'repo', 'isnet-medium-512'));
  const variant = await runCli(['models', 'export', '--triton', path.join(dir, 'repo'), 'isnet-medium']);
  t.equal(variant.code, 2);
  t.match(variant.stderr, /isnet-medium-512 is a symbolic link/);
  t.same(await fs.readdir(path.join(dir, 'elsewhere')), [], 'nothing written where the link points');
});
