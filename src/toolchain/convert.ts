/**
 * Graph rewrites of ONNX models, done once and cached (see weights.ts).
 *
 * fp16 -> fp32: onnxruntime's CPU backend converts fp16 weights to fp32 at every session load,
 * and keeps both copies while it does. Converting once on disk makes loads faster, inference
 * 4-9 % faster and peak memory about 15 % lower (measured on ISNet here).
 *
 * One output: the copy keeps only the output the pipeline reads (keepOnlyOutput).
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
type Onnx = typeof import('onnx-proto').onnx;

const FLOAT = 1;
const FLOAT16 = 10;

let halfTable: Float32Array | null = null;
/** Every IEEE 754 half-precision bit pattern as a float32 (65536 entries, built once). */
function halfToFloatTable(): Float32Array {
  if (halfTable) return halfTable;
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    if (exp === 0) table[h] = sign * frac * 2 ** -24; // subnormal
    else if (exp === 31) table[h] = frac ? NaN : sign * Infinity;
    else table[h] = sign * (1 + frac / 1024) * 2 ** (exp - 15);
  }
  halfTable = table;
  return table;
}

/** fp16 little-endian bytes to fp32 little-endian bytes. */
export function halfBytesToFloatBytes(half: Uint8Array): Buffer {
  const table = halfToFloatTable();
  const n = half.length >> 1;
  const out = Buffer.alloc(n * 4);
  const view = new DataView(half.buffer, half.byteOffset, half.byteLength);
  for (let i = 0; i < n; i++) out.writeFloatLE(table[view.getUint16(i * 2, true)], i * 4);
  return out;
}

/** Converts an fp16 tensor proto in place; int32Data holds fp16 bits when rawData is absent. */
function convertTensor(t: InstanceType<Onnx['TensorProto']>): void {
  if (t.dataType !== FLOAT16) return;
  let bits: Uint8Array;
  if (t.rawData && t.rawData.length) bits = t.rawData;
  else {
    const b = Buffer.alloc(t.int32Data.length * 2);
    t.int32Data.forEach((v, i) => b.writeUInt16LE(v & 0xffff, i * 2));
    bits = b;
  }
  t.rawData = halfBytesToFloatBytes(bits);
  t.int32Data = [];
  t.dataType = FLOAT;
}

/**
 * Rewrites an fp16 model to fp32: initializers, Constant tensors, Cast targets, and the declared
 * element types of inputs, outputs and intermediate values.
 */
export function convertFp16ToFp32(modelBytes: Uint8Array): Buffer {
  const { onnx } = require('onnx-proto') as typeof import('onnx-proto');
  const model = onnx.ModelProto.decode(modelBytes);
  const graph = model.graph!;
  for (const init of graph.initializer ?? []) convertTensor(init as InstanceType<Onnx['TensorProto']>);
  for (const node of graph.node ?? []) {
    for (const attr of node.attribute ?? []) {
      if (attr.t) convertTensor(attr.t as InstanceType<Onnx['TensorProto']>);
      if (node.opType === 'Cast' && attr.name === 'to' && Number(attr.i) === FLOAT16) attr.i = FLOAT;
    }
  }
  for (const info of [...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])]) {
    const tt = info.type?.tensorType;
    if (tt && tt.elemType === FLOAT16) tt.elemType = FLOAT;
  }
  return Buffer.from(onnx.ModelProto.encode(model).finish());
}

/**
 * Keeps only the graph output named `output` and drops every node and initializer it does not
 * need. ISNet declares twelve outputs (six side maps at full size and six feature maps); the
 * pipeline reads one. onnxruntime runs the whole graph whatever is fetched (its "only the path to
 * the fetches" option exists in training builds only), so the five other side maps' resizes to
 * 1024 x 1024, their sigmoids and the feature maps' casts ran at every inference for nothing.
 * The kept output is bit-identical (docs/models.md and docs/internals.md, "int8").
 */
export function keepOnlyOutput(modelBytes: Uint8Array, output: string): Buffer {
  const { onnx } = require('onnx-proto') as typeof import('onnx-proto');
  const model = onnx.ModelProto.decode(modelBytes);
  const graph = model.graph!;
  if (!(graph.output ?? []).some((o) => o.name === output)) return Buffer.from(modelBytes);
  graph.output = (graph.output ?? []).filter((o) => o.name === output);
  type GraphNode = import('onnx-proto').onnx.INodeProto;
  const producer = new Map<string, GraphNode>();
  for (const node of graph.node ?? []) for (const o of node.output ?? []) producer.set(o, node);
  const needed = new Set<string>();
  const live = new Set<GraphNode>();
  const stack = [output];
  while (stack.length) {
    const name = stack.pop()!;
    if (needed.has(name)) continue;
    needed.add(name);
    const node = producer.get(name);
    if (node && !live.has(node)) {
      live.add(node);
      stack.push(...(node.input ?? []).filter(Boolean));
    }
  }
  graph.node = (graph.node ?? []).filter((n) => live.has(n));
  graph.initializer = (graph.initializer ?? []).filter((t) => needed.has(t.name!));
  graph.valueInfo = (graph.valueInfo ?? []).filter((v) => needed.has(v.name!));
  return Buffer.from(onnx.ModelProto.encode(model).finish());
}
