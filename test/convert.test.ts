import t from 'tap';
import { createRequire } from 'node:module';
import * as ort from 'onnxruntime-node';
import { halfBytesToFloatBytes, keepOnlyOutput } from '../src/toolchain/convert.js';

const require = createRequire(import.meta.url);
const { onnx } = require('onnx-proto') as typeof import('onnx-proto');

t.test('fp16 bits become the same numbers in fp32', async (t) => {
  const halves = [0x0000, 0x3c00, 0xc000, 0x3555, 0x7bff, 0x0001, 0x7c00, 0xfc00, 0x8000];
  const bytes = Buffer.alloc(halves.length * 2);
  halves.forEach((h, i) => bytes.writeUInt16LE(h, i * 2));
  const out = halfBytesToFloatBytes(bytes);
  const floats = Array.from({ length: halves.length }, (_, i) => out.readFloatLE(i * 4));
  t.same(floats.slice(0, 3), [0, 1, -2]);
  t.ok(Math.abs(floats[3] - 0.33325) < 1e-4, 'one third, rounded to half precision');
  t.equal(floats[4], 65504, 'largest half');
  t.equal(floats[5], 2 ** -24, 'smallest subnormal');
  t.equal(floats[6], Infinity);
  t.equal(floats[7], -Infinity);
  t.ok(Object.is(floats[8], -0), 'negative zero');
});

/**
 * input [1,2] -> Relu -> "output"; input -> Neg -> Sigmoid -> "extra" (a second graph output, as
 * ISNet's side maps), with an initializer only the extra branch uses.
 */
function twoOutputs(): Uint8Array {
  const info = (name: string) => onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType: 1, shape: { dim: [{ dimValue: 1 }, { dimValue: 2 }] } } } });
  const graph = onnx.GraphProto.create({
    name: 'two',
    node: [
      onnx.NodeProto.create({ opType: 'Relu', name: 'relu', input: ['input'], output: ['output'] }),
      onnx.NodeProto.create({ opType: 'Add', name: 'add', input: ['input', 'bias'], output: ['shifted'] }),
      onnx.NodeProto.create({ opType: 'Sigmoid', name: 'sig', input: ['shifted'], output: ['extra'] }),
    ],
    initializer: [onnx.TensorProto.create({ name: 'bias', dataType: 1, dims: [1, 2], rawData: new Uint8Array(new Float32Array([1, 2]).buffer) })],
    input: [info('input')],
    output: [info('output'), info('extra')],
  });
  return onnx.ModelProto.encode(onnx.ModelProto.create({ irVersion: 8, opsetImport: [{ domain: '', version: 15 }], graph })).finish();
}

t.test('keepOnlyOutput drops the outputs, nodes and initializers the kept output does not need', async (t) => {
  const before = twoOutputs();
  const after = keepOnlyOutput(before, 'output');
  const graph = onnx.ModelProto.decode(after).graph!;
  t.same(graph.output!.map((o) => o.name), ['output']);
  t.same(graph.node!.map((n) => n.name), ['relu'], 'the extra branch is gone');
  t.same(graph.initializer!.map((i) => i.name), [], 'its initializer too');
  const input = new ort.Tensor('float32', new Float32Array([-1.5, 2.5]), [1, 2]);
  const full = await (await ort.InferenceSession.create(before)).run({ input }, ['output']);
  const pruned = await ort.InferenceSession.create(after);
  t.same(pruned.outputNames, ['output']);
  t.same(Array.from((await pruned.run({ input })).output.data as Float32Array), Array.from(full.output.data as Float32Array), 'the kept output is identical');
  t.equal(keepOnlyOutput(before, 'missing').length, before.length, 'an output the graph lacks: the model is left as it is');
});
