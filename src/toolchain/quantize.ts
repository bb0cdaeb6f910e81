/**
 * Static int8 quantization of a convolutional ONNX model in the QDQ format (issue 17), our own
 * code on onnx-proto since no Python tooling is reachable.
 *
 * Every quantized Conv gets:
 * - its activation input through QuantizeLinear -> DequantizeLinear (uint8, asymmetric),
 * - its weights stored as int8, per output channel, symmetric (zero point 0), behind a
 *   DequantizeLinear on axis 0,
 * - its bias stored as int32 with scale = input scale x weight scale of the channel,
 * - the Relu after it followed by QuantizeLinear -> DequantizeLinear (uint8, zero point 0).
 * onnxruntime's CPU provider then folds the Relu into the QuantizeLinear (its zero point is the
 * type's minimum) and fuses DQ -> Conv -> Q into one QLinearConv, an integer kernel (VNNI on
 * CPUs that have it).
 *
 * Activation ranges come from calibration data (calibrationGraph + quantization-ranges in
 * models/calibration), keyed by tensor name; the rewrite itself is pure and deterministic.
 */
import { createRequire } from 'node:module';
import { CutoutError } from '../errors.js';
import { consumersOf, graphOutputs, withoutFloatCasts } from './onnx-graph.js';

const require = createRequire(import.meta.url);
type Onnx = typeof import('onnx-proto').onnx;
type Tensor = InstanceType<Onnx['TensorProto']>;
type Node = InstanceType<Onnx['NodeProto']>;

const FLOAT = 1;
const UINT8 = 2;
const INT8 = 3;
const INT32 = 6;
const ATTR_INT = 2;

/** Round half to even, as ONNX QuantizeLinear rounds (so weights match what the runtime would compute). */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** The observed range of one activation tensor. */
export interface TensorRange {
  min: number;
  max: number;
}

/** The uint8 scale and zero point covering [min, max] (always including 0, as QDQ requires). */
export function uint8Params(range: TensorRange): { scale: number; zeroPoint: number } {
  const lo = Math.min(0, range.min);
  const hi = Math.max(0, range.max);
  if (!(hi > lo)) return { scale: 1, zeroPoint: 0 };
  const scale = (hi - lo) / 255;
  const zeroPoint = Math.max(0, Math.min(255, roundHalfEven(-lo / scale)));
  return { scale, zeroPoint };
}

/**
 * Per-output-channel symmetric int8 quantization of a weight tensor laid out [O, ...]:
 * scale_c = max|w_c| / 127, q = round(w / scale_c) clamped to [-127, 127].
 */
export function quantizeWeightsPerChannel(weights: Float32Array, channels: number): { data: Int8Array; scales: Float32Array } {
  const per = weights.length / channels;
  if (!Number.isInteger(per)) throw new CutoutError('processing_failed', `Weight tensor of ${weights.length} values does not split into ${channels} channels`);
  const data = new Int8Array(weights.length);
  const scales = new Float32Array(channels);
  for (let c = 0; c < channels; c++) {
    let absMax = 0;
    for (let i = c * per; i < (c + 1) * per; i++) absMax = Math.max(absMax, Math.abs(weights[i]));
    // An all-zero channel still needs a positive scale; its values quantize to 0 either way.
    const scale = absMax > 0 ? absMax / 127 : 1;
    scales[c] = scale;
    for (let i = c * per; i < (c + 1) * per; i++) data[i] = Math.max(-127, Math.min(127, roundHalfEven(weights[i] / scale)));
  }
  return { data, scales };
}

/** int32 bias with scale inputScale x weightScale[c] and zero point 0, as QLinearConv expects. */
export function quantizeBias(bias: Float32Array, inputScale: number, weightScales: Float32Array): { data: Int32Array; scales: Float32Array } {
  const data = new Int32Array(bias.length);
  const scales = new Float32Array(bias.length);
  for (let c = 0; c < bias.length; c++) {
    const scale = inputScale * weightScales[c];
    scales[c] = scale;
    data[c] = Math.max(-(2 ** 31), Math.min(2 ** 31 - 1, roundHalfEven(bias[c] / scale)));
  }
  return { data, scales };
}

function floatValues(t: Tensor): Float32Array {
  if (t.dataType !== FLOAT) throw new CutoutError('processing_failed', `Initializer ${t.name} is not float32`);
  if (t.rawData && t.rawData.length) {
    const copy = new Uint8Array(t.rawData); // aligned copy
    return new Float32Array(copy.buffer, 0, copy.byteLength / 4);
  }
  return Float32Array.from(t.floatData ?? []);
}

function onnxModule(): Onnx {
  return (require('onnx-proto') as typeof import('onnx-proto')).onnx;
}

function tensor(onnx: Onnx, name: string, dataType: number, dims: number[], bytes: ArrayBufferView): Tensor {
  return onnx.TensorProto.create({ name, dataType, dims, rawData: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) });
}

/** Which nodes a rewrite may quantize: a Conv whose only consumer is a Relu, with initializer weights. */
interface ConvRelu {
  conv: Node;
  relu: Node;
}

function convReluPairs(nodes: Node[], initializers: Map<string, Tensor>): ConvRelu[] {
  const consumers = consumersOf(nodes);
  const pairs: ConvRelu[] = [];
  for (const conv of nodes) {
    if (conv.opType !== 'Conv') continue;
    const after = consumers.get(conv.output![0]) ?? [];
    if (after.length !== 1 || after[0].opType !== 'Relu') continue;
    if (!initializers.has(conv.input![1])) continue;
    if (conv.input![2] && !initializers.has(conv.input![2])) continue;
    pairs.push({ conv, relu: after[0] });
  }
  return pairs;
}

/**
 * The tensors whose ranges a quantization needs: each Conv's activation input, its Relu's output,
 * and the output of each Add of two such Relu outputs (a residual block's sum).
 */
export function tensorsToCalibrate(modelBytes: Uint8Array): string[] {
  const onnx = onnxModule();
  const graph = onnx.ModelProto.decode(modelBytes).graph!;
  const initializers = new Map((graph.initializer ?? []).map((t) => [t.name!, t as Tensor]));
  const nodes = withoutFloatCasts((graph.node ?? []) as Node[], graphOutputs(graph));
  const names = new Set<string>();
  const reluOutputs = new Set<string>();
  for (const { conv, relu } of convReluPairs(nodes, initializers)) {
    names.add(conv.input![0]);
    names.add(relu.output![0]);
    reluOutputs.add(relu.output![0]);
  }
  for (const n of nodes) if (n.opType === 'Add' && n.input!.length === 2 && n.input!.every((i) => reluOutputs.has(i))) names.add(n.output![0]);
  return [...names];
}

/**
 * The model with, for every tensor to calibrate, a ReduceMin and a ReduceMax over all of it as
 * extra scalar outputs (`<name>::min`, `<name>::max`): one run per calibration photo gives every
 * range without fetching the large activation maps themselves.
 */
export function calibrationGraph(modelBytes: Uint8Array): { bytes: Buffer; tensors: string[] } {
  const onnx = onnxModule();
  const tensors = tensorsToCalibrate(modelBytes);
  const model = onnx.ModelProto.decode(modelBytes);
  const graph = model.graph!;
  for (const name of tensors) {
    for (const op of ['Min', 'Max'] as const) {
      const output = `${name}::${op.toLowerCase()}`;
      graph.node!.push(onnx.NodeProto.create({ opType: `Reduce${op}`, name: `calibrate_${output}`, input: [name], output: [output], attribute: [{ name: 'keepdims', type: ATTR_INT, i: 0 }] }));
      graph.output!.push(onnx.ValueInfoProto.create({ name: output, type: { tensorType: { elemType: FLOAT, shape: { dim: [] } } } }));
    }
  }
  return { bytes: Buffer.from(onnx.ModelProto.encode(model).finish()), tensors };
}

/**
 * The model with the named intermediate tensors as extra graph outputs (float32, shape left to
 * the runtime): the calibration's second pass fetches them to count their values.
 */
export function withTensorOutputs(modelBytes: Uint8Array, tensors: string[]): Buffer {
  const onnx = onnxModule();
  const model = onnx.ModelProto.decode(modelBytes);
  for (const name of tensors) model.graph!.output!.push(onnx.ValueInfoProto.create({ name, type: { tensorType: { elemType: FLOAT } } }));
  return Buffer.from(onnx.ModelProto.encode(model).finish());
}

type Uint8Params = { scale: number; zeroPoint: number };

/**
 * The uint8 parameters of every tensor the rewrite quantizes, decided in graph order (a node's
 * inputs before its outputs):
 * - a quantized conv's input and its Relu's output: their calibrated ranges (a Relu output from
 *   0, so that the zero point is 0 and onnxruntime folds the Relu into the QuantizeLinear);
 * - the output of a MaxPool or Resize of a quantized tensor: that tensor's own parameters, which
 *   lets onnxruntime run the op on uint8 (DQ -> op -> Q with equal parameters) instead of
 *   dequantizing, reordering the layout for a float kernel and quantizing again. A pool's
 *   maximum and a bilinear resize never leave their input's range, so nothing is clipped;
 * - the sum of two quantized tensors (a residual block's output) with a calibrated range, unless
 *   it only feeds fp32 convs: onnxruntime then runs QLinearAdd, and the concats of quantized
 *   inputs that follow become QLinearConcat.
 * Everything else stays fp32.
 */
function quantizationParams(nodes: Node[], pairs: ConvRelu[], ranges: Record<string, TensorRange>): Map<string, Uint8Params> {
  const convInputs = new Set(pairs.map((p) => p.conv.input![0]));
  const reluOutputs = new Set(pairs.map((p) => p.relu.output![0]));
  const quantizedConvs = new Set(pairs.map((p) => p.conv));
  const consumers = consumersOf(nodes);
  const produced = new Set(nodes.flatMap((n) => n.output ?? []));
  const params = new Map<string, Uint8Params>();
  for (const name of convInputs) if (!produced.has(name)) params.set(name, uint8Params(ranges[name])); // graph inputs
  for (const n of nodes) {
    const out = n.output?.[0];
    if (!out) continue;
    const input = n.input?.[0] ?? '';
    if (reluOutputs.has(out)) {
      params.set(out, uint8Params({ min: 0, max: ranges[out].max }));
    } else if ((n.opType === 'MaxPool' || n.opType === 'Resize') && params.has(input)) {
      params.set(out, params.get(input)!);
    } else if (
      n.opType === 'Add' && n.input!.length === 2 && n.input!.every((i) => params.has(i)) && ranges[out] &&
      (consumers.get(out) ?? []).some((c) => c.opType !== 'Conv' || quantizedConvs.has(c))
    ) {
      params.set(out, uint8Params(ranges[out]));
    } else if (convInputs.has(out)) {
      params.set(out, uint8Params(ranges[out]));
    }
  }
  return params;
}

export interface QuantizeOptions {
  /** Activation ranges by tensor name. */
  ranges: Record<string, TensorRange>;
  /** Conv node names left in fp32 (with their Relu). */
  keepFloat?: ReadonlySet<string>;
}

export interface QuantizeReport {
  bytes: Buffer;
  quantizedConvs: number;
  floatConvs: number;
  /** The names of the quantized Conv nodes, in graph order (what a per-node keep-float screen walks). */
  quantizedNames: string[];
}

/**
 * Rewrites an fp32 model to QDQ int8 (see the file's comment). A Conv whose input or Relu
 * output has no calibrated range stays fp32; so do Convs not followed by a Relu (ISNet's side
 * outputs, whose values go straight to the sigmoid) and those named in `keepFloat`.
 */
export function quantizeModel(modelBytes: Uint8Array, options: QuantizeOptions): QuantizeReport {
  const onnx = onnxModule();
  const model = onnx.ModelProto.decode(modelBytes);
  const graph = model.graph!;
  const nodes = withoutFloatCasts((graph.node ?? []) as Node[], graphOutputs(graph));
  const initializers = new Map((graph.initializer ?? []).map((t) => [t.name!, t as Tensor]));
  const keep = options.keepFloat ?? new Set<string>();
  const pairs = convReluPairs(nodes, initializers).filter(
    ({ conv, relu }) => !keep.has(conv.name!) && options.ranges[conv.input![0]] && options.ranges[relu.output![0]],
  );
  const allConvs = nodes.filter((n) => n.opType === 'Conv').length;
  const params = quantizationParams(nodes, pairs, options.ranges);

  // One Q -> DQ pair per quantized tensor, shared by all its consumers.
  const quantized = new Map<string, { scale: number; zeroPoint: number; dq: string }>();
  const added: { after: string; nodes: Node[] }[] = [];
  const newInits: Tensor[] = [];
  const qdq = (name: string) => {
    const held = quantized.get(name);
    if (held) return held;
    const { scale, zeroPoint } = params.get(name)!;
    const scaleName = `${name}_scale`;
    const zpName = `${name}_zero_point`;
    newInits.push(tensor(onnx, scaleName, FLOAT, [], new Float32Array([scale])), tensor(onnx, zpName, UINT8, [], new Uint8Array([zeroPoint])));
    const q = onnx.NodeProto.create({ opType: 'QuantizeLinear', name: `${name}_QuantizeLinear`, input: [name, scaleName, zpName], output: [`${name}_quantized`] });
    const dq = onnx.NodeProto.create({ opType: 'DequantizeLinear', name: `${name}_DequantizeLinear`, input: [`${name}_quantized`, scaleName, zpName], output: [`${name}_dequantized`] });
    added.push({ after: name, nodes: [q, dq] });
    const entry = { scale, zeroPoint, dq: `${name}_dequantized` };
    quantized.set(name, entry);
    return entry;
  };

  for (const { conv, relu } of pairs) {
    const x = qdq(conv.input![0]);
    qdq(relu.output![0]);

    const w = initializers.get(conv.input![1])!;
    const channels = Number(w.dims![0].toString());
    const wq = quantizeWeightsPerChannel(floatValues(w), channels);
    const wName = conv.input![1];
    newInits.push(
      tensor(onnx, `${wName}_quantized`, INT8, w.dims!.map((d) => Number(d.toString())), wq.data),
      tensor(onnx, `${wName}_scale`, FLOAT, [channels], wq.scales),
      tensor(onnx, `${wName}_zero_point`, INT8, [channels], new Int8Array(channels)),
    );
    initializers.delete(wName);
    const weightDq = onnx.NodeProto.create({
      opType: 'DequantizeLinear', name: `${wName}_DequantizeLinear`,
      input: [`${wName}_quantized`, `${wName}_scale`, `${wName}_zero_point`], output: [`${wName}_dequantized`],
      attribute: [{ name: 'axis', type: ATTR_INT, i: 0 }],
    });
    const convInputs = [x.dq, `${wName}_dequantized`];
    const front: Node[] = [weightDq];
    if (conv.input![2]) {
      const bName = conv.input![2];
      const bq = quantizeBias(floatValues(initializers.get(bName)!), x.scale, wq.scales);
      newInits.push(
        tensor(onnx, `${bName}_quantized`, INT32, [channels], bq.data),
        tensor(onnx, `${bName}_scale`, FLOAT, [channels], bq.scales),
        tensor(onnx, `${bName}_zero_point`, INT32, [channels], new Int32Array(channels)),
      );
      initializers.delete(bName);
      front.push(onnx.NodeProto.create({
        opType: 'DequantizeLinear', name: `${bName}_DequantizeLinear`,
        input: [`${bName}_quantized`, `${bName}_scale`, `${bName}_zero_point`], output: [`${bName}_dequantized`],
        attribute: [{ name: 'axis', type: ATTR_INT, i: 0 }],
      }));
      convInputs.push(`${bName}_dequantized`);
    }
    conv.input = convInputs;
    added.push({ after: '', nodes: front });
  }

  // The glue between the quantized convs: pools, resizes and residual sums (quantizationParams).
  for (const name of params.keys()) qdq(name);

  // Every consumer of a quantized tensor reads its DequantizeLinear (except the pair's own Q);
  // graph outputs keep the fp32 tensor.
  for (const n of nodes) {
    if (n.opType === 'QuantizeLinear') continue;
    n.input = (n.input ?? []).map((i, k) => (n.opType === 'Conv' && k > 0 ? i : quantized.get(i)?.dq ?? i));
  }
  // Topological order: weight/bias DQs first, each activation pair right after its producer.
  const pairAfter = new Map(added.filter((a) => a.after).map((a) => [a.after, a.nodes]));
  const ordered: Node[] = added.filter((a) => !a.after).flatMap((a) => a.nodes);
  for (const name of graph.input?.map((i) => i.name!) ?? []) ordered.push(...(pairAfter.get(name) ?? []));
  for (const n of nodes) {
    ordered.push(n);
    for (const o of n.output ?? []) ordered.push(...(pairAfter.get(o) ?? []));
  }
  graph.node = ordered;
  graph.initializer = [...initializers.values(), ...newInits];
  // DequantizeLinear with a per-channel axis needs opset 13 or later.
  const opset = (model.opsetImport ?? []).find((o) => !o.domain);
  if (!opset || Number(opset.version!.toString()) < 13) throw new CutoutError('processing_failed', 'int8 quantization needs an ONNX opset of 13 or later');
  return { bytes: Buffer.from(onnx.ModelProto.encode(model).finish()), quantizedConvs: pairs.length, floatConvs: allConvs - pairs.length, quantizedNames: pairs.map((p) => p.conv.name!) };
}
