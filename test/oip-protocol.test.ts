/** The pure parts of the Open Inference Protocol code: metadata checks, tensor encodings, the Triton config. */
import t from 'tap';
import { resolveModel } from '../src/toolchain/manifest.js';
import { expectedTensors, fp32Bytes, fp32FromJson, jsonValueBound, metadataMismatch, readTensors, shapeAdmits, splitBody, withoutCredentials } from '../src/oip/protocol.js';
import { tritonConfig } from '../src/oip/triton.js';
import { busyDelayMs, retryAfterMs } from '../src/oip/http.js';
import { outputTensor } from '../src/oip/client.js';
import { modelsToServe, servedName } from '../src/oip/server.js';

const manifest = resolveModel('isnet-medium');

t.test('shapes: -1 is a wildcard, ranks must agree', async (t) => {
  t.ok(shapeAdmits([-1, 3, -1, -1], [1, 3, 1024, 1024]));
  t.ok(shapeAdmits([1, 3, 1024, 1024], [1, 3, 1024, 1024]));
  t.notOk(shapeAdmits([1, 3, 512, 512], [1, 3, 1024, 1024]));
  t.notOk(shapeAdmits([3, 1024, 1024], [1, 3, 1024, 1024]));
});

t.test('metadata: names, datatypes and shapes against the manifest', async (t) => {
  const want = expectedTensors(manifest, 1024);
  t.same(want.input, { name: 'input', datatype: 'FP32', shape: [1, 3, 1024, 1024] });
  t.same(expectedTensors(manifest, 512).output.shape, [1, 1, 512, 512]);
  const good = { inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 3, 1024, 1024] }], outputs: [{ name: 'output', datatype: 'FP32', shape: [1, 1, 1024, 1024] }, { name: '1890', datatype: 'FP32', shape: [1, 1, 1024, 1024] }] };
  t.equal(metadataMismatch(good, want), null, 'extra outputs and wildcards are fine');
  t.match(metadataMismatch({ ...good, inputs: [{ name: 'images', datatype: 'FP32', shape: [1, 3, 1024, 1024] }] }, want), /no input named "input" \(it has: images\)/);
  t.match(metadataMismatch({ ...good, outputs: [{ name: 'output', datatype: 'FP16', shape: [1, 1, 1024, 1024] }] }, want), /output "output" is FP16, expected FP32/);
  t.match(metadataMismatch({ ...good, outputs: [{ name: 'output', datatype: 'FP32', shape: [1, 1, 320, 320] }] }, want), /output "output" has shape/);
  t.match(metadataMismatch({}, want), /no input named "input" \(it has: none\)/);
});

t.test('tensors: binary parts in order after the JSON header, JSON data flat or nested', async (t) => {
  const a = new Float32Array([1, 2, 3, 4]);
  const b = new Float32Array([0.5, -0.5]);
  const header = { outputs: [
    { name: 'a', datatype: 'FP32', shape: [2, 2], parameters: { binary_data_size: 16 } },
    { name: 'j', datatype: 'FP32', shape: [2, 1], data: [[7], [8]] },
    { name: 'b', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } },
  ] };
  const json = Buffer.from(JSON.stringify(header)); // an odd length: the binary part is unaligned
  const body = Buffer.concat([json, Buffer.from(' '), fp32Bytes(a), fp32Bytes(b)]);
  const split = splitBody(body, String(json.length + 1));
  const tensors = readTensors((split.json as typeof header).outputs, split.binary);
  t.same(tensors.map((x) => [x.name, Array.from(x.data)]), [['a', [1, 2, 3, 4]], ['j', [7, 8]], ['b', [0.5, -0.5]]]);
  t.throws(() => readTensors([{ name: 'a', datatype: 'FP32', shape: [2, 2], parameters: { binary_data_size: 12 } }], fp32Bytes(a)), /does not match shape/);
  t.throws(() => readTensors([{ name: 'a', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } }], fp32Bytes(a)), /no tensor claims/);
  t.throws(() => readTensors([{ name: 'x', datatype: 'INT64', shape: [1], data: [1] }], Buffer.alloc(0)), /only FP32/);
  t.throws(() => splitBody(Buffer.from('{}'), '10'), /does not fit/);
  t.same(splitBody(Buffer.from('{"a":1}'), null).json, { a: 1 }, 'no header length: all JSON');
});

t.test('URLs lose their credentials for display', async (t) => {
  t.equal(withoutCredentials(new URL('http://user:pw@gpu-host:8000/')), 'http://gpu-host:8000');
  t.equal(withoutCredentials(new URL('https://gpu-host/kserve/')), 'https://gpu-host/kserve');
});

t.test('Triton config: variants take their side', async (t) => {
  const side = tritonConfig({ ...manifest, input: { ...manifest.input, width: 512, height: 512 } }, 'isnet-medium-512');
  t.match(side, /name: "isnet-medium-512"/);
  t.match(side, /dims: \[ 1, 3, 512, 512 \]/);
  t.match(side, /dims: \[ 1, 1, 512, 512 \]/);
});

t.test('JSON tensor data: nested or flat, walked without a copy, stopped at the first element too many', async (t) => {
  t.same(Array.from(fp32FromJson([[1, 2], [3, [4]]], 4)), [1, 2, 3, 4]);
  t.throws(() => fp32FromJson([[1, 2], [3, 4], [5]], 4), /more than 4 elements/);
  t.throws(() => fp32FromJson([1, 2], 4), /has 2 elements, the shape needs 4/);
  t.throws(() => fp32FromJson([1, 'x'], 2), /element 1 is not a number/);
  t.equal(jsonValueBound(Buffer.from('{"data": [[0],[1],[2]]}')), 6, 'commas and opening brackets');
});

t.test('the answer: only the output asked for is decoded, the binary parts before it skipped by size', async (t) => {
  const other = new Float32Array(1000).fill(7);
  const ours = new Float32Array([0.25, 0.75]);
  const response = { model_name: 'm', outputs: [
    { name: '1890', datatype: 'FP32', shape: [1000], parameters: { binary_data_size: 4000 } },
    { name: 'json-one', datatype: 'INT64', shape: [1], data: ['not decoded'] },
    { name: 'output', datatype: 'FP32', shape: [1, 1, 1, 2], parameters: { binary_data_size: 8 } },
  ] };
  const tensor = outputTensor(response, Buffer.concat([fp32Bytes(other), fp32Bytes(ours)]), 'output');
  t.same(Array.from(tensor.data), [0.25, 0.75]);
  t.same(tensor.shape, [1, 1, 1, 2]);
  t.throws(() => outputTensor({ model_name: 'm', outputs: [] }, Buffer.alloc(0), 'output'), /no output "output"/);
  t.throws(() => outputTensor({ model_name: 'm', outputs: [{ name: 'output', datatype: 'FP32', shape: [4], parameters: { binary_data_size: 16 } }] }, Buffer.alloc(8), 'output'), /binary_data_size says 16/);
  t.same(Array.from(outputTensor({ model_name: 'm', outputs: [{ name: 'output', datatype: 'FP32', shape: [2], data: [1, 2] }] }, Buffer.alloc(0), 'output').data), [1, 2], 'JSON data');
});

t.test('busy retries: Retry-After honoured with up to half again as jitter, else full jitter over a doubling bound', async (t) => {
  t.equal(retryAfterMs('2'), 2000);
  t.equal(retryAfterMs(null), null);
  t.equal(retryAfterMs('soon'), null);
  t.equal(retryAfterMs(new Date(10_000).toUTCString(), 7_000), 3000, 'an HTTP date');
  t.equal(busyDelayMs(1, 1000, 200, 5000, () => 0), 1000);
  t.equal(busyDelayMs(1, 1000, 200, 5000, () => 1), 1500);
  t.equal(busyDelayMs(1, 60_000, 200, 5000, () => 0), 5000, 'a long Retry-After is capped');
  t.equal(busyDelayMs(1, null, 200, 5000, () => 1), 200);
  t.equal(busyDelayMs(3, null, 200, 5000, () => 1), 800, 'doubling');
  t.equal(busyDelayMs(10, null, 200, 5000, () => 1), 5000, 'up to the max');
  t.equal(busyDelayMs(10, null, 200, 5000, () => 0), 100, 'jitter down to half the first delay');
});

t.test('model names say what runs', async (t) => {
  t.equal(servedName(manifest, 1024, 'fp32'), 'isnet-medium');
  t.equal(servedName(manifest, 768, 'int8'), 'isnet-medium-768-int8');
  const names = (p: 'auto' | 'fp32' | 'int8', autoAt: (side: number) => 'fp32' | 'int8') => modelsToServe(manifest, p, [1024, 768], autoAt).map((m) => `${m.name}:${m.side}:${m.precision}`);
  const others = manifest.sides.filter((s) => s !== 1024);
  t.ok(others.includes(512) && others.includes(768), 'the manifest lists the sides of fast and balanced');
  const fp32 = ['isnet-medium:1024:fp32', ...others.map((s) => `isnet-medium-${s}:${s}:fp32`)];
  t.same(names('fp32', () => 'int8'), fp32);
  t.same(names('int8', () => 'fp32'), ['isnet-medium-int8:1024:int8', 'isnet-medium-768-int8:768:int8']);
  t.same(names('auto', () => 'fp32'), fp32, 'auto without VNNI: the fp32 names');
  t.same(names('auto', (side) => (side === 512 ? 'fp32' : 'int8')), [
    'isnet-medium-int8:1024:int8', 'isnet-medium-768-int8:768:int8', ...fp32,
  ], 'auto with VNNI: its int8 picks first (the one loaded at start), and the fp32 names');
});
