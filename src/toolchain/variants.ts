/**
 * Input-side variants of a fully convolutional model (issue 7). The ISNet export baked its
 * 1024x1024 input into the graph: every `Resize` takes its output size from
 * `Concat(Slice(Shape(x), 0, 2), Constant([h, w]))` with `[h, w]` traced at 1024. Rewriting those
 * constants to `ceil(v * S / 1024)` (the ceil-mode max-pools give exactly those sizes when S is a
 * multiple of 64) and the declared shapes to side S gives the same weights running at S x S.
 * The rewrite is done once per (model, side) and cached by weights.ts.
 */
import { createRequire } from 'node:module';
import { CutoutError } from '../errors.js';
import type { Quality } from '../options.js';
import type { ModelManifest } from './manifest.js';

const require = createRequire(import.meta.url);
type Onnx = typeof import('onnx-proto').onnx;
type Tensor = InstanceType<Onnx['TensorProto']>;
type ValueInfo = InstanceType<Onnx['ValueInfoProto']>;
type Node = InstanceType<Onnx['NodeProto']>;

const INT64 = 7;

/** Sides must keep every pooled map an integer size: 1024 / 64 = 16 is the depth of ISNet's pooling. */
export const SIDE_MULTIPLE = 64;

export function checkSide(side: number): void {
  if (!Number.isInteger(side) || side <= 0 || side % SIDE_MULTIPLE !== 0) {
    throw new CutoutError('invalid_request', `Model input side must be a positive multiple of ${SIDE_MULTIPLE}, got ${side}`);
  }
}

/** The int64 values of a tensor proto (raw little-endian bytes or int64Data). */
function int64Values(t: Tensor): bigint[] {
  if (t.rawData && t.rawData.length) {
    const raw = Buffer.from(t.rawData.buffer, t.rawData.byteOffset, t.rawData.byteLength);
    return Array.from({ length: raw.length / 8 }, (_, i) => raw.readBigInt64LE(i * 8));
  }
  return (t.int64Data ?? []).map((v) => BigInt(v.toString()));
}

function setInt64Values(t: Tensor, values: bigint[]): void {
  const raw = Buffer.alloc(values.length * 8);
  values.forEach((v, i) => raw.writeBigInt64LE(v, i * 8));
  t.rawData = raw;
  t.int64Data = [];
}

/** Scales a spatial size traced at `base` to `side`: ceil(v * side / base), as ceil-mode pools give. */
export function scaleDim(v: number, side: number, base: number): number {
  return Math.ceil((v * side) / base);
}

/**
 * Returns the model rewritten to take a `[1, 3, side, side]` input. Throws when a `Resize` does
 * not take its size from the traced `Concat(..., Constant)` pattern (a model this rewrite does not
 * understand is refused rather than silently mis-sized).
 */
export function rewriteInputSide(modelBytes: Uint8Array, side: number, baseSide = 1024): Buffer {
  checkSide(side);
  const { onnx } = require('onnx-proto') as typeof import('onnx-proto');
  const model = onnx.ModelProto.decode(modelBytes);
  const graph = model.graph!;
  const nodes = (graph.node ?? []) as Node[];
  const producer = new Map<string, Node>();
  for (const node of nodes) for (const o of node.output ?? []) producer.set(o, node);
  const initializers = new Map((graph.initializer ?? []).map((t) => [t.name!, t as Tensor]));

  /** The constant tensor behind a value name: a Constant node's `value`, or an initializer. */
  const constantTensor = (name: string): Tensor | null => {
    const init = initializers.get(name);
    if (init) return init;
    const node = producer.get(name);
    if (node?.opType !== 'Constant') return null;
    const attr = (node.attribute ?? []).find((a) => a.name === 'value');
    return (attr?.t as Tensor | undefined) ?? null;
  };

  const done = new Set<Tensor>();
  let resizes = 0;
  for (const node of nodes) {
    if (node.opType !== 'Resize') continue;
    resizes++;
    const sizes = node.input?.[3];
    // A Resize by scales (no sizes input) is independent of the input side.
    if (!sizes) continue;
    const concat = producer.get(sizes);
    const tail = concat?.opType === 'Concat' ? concat.input?.[concat.input.length - 1] : undefined;
    const t = tail ? constantTensor(tail) : constantTensor(sizes);
    if (!t || t.dataType !== INT64) {
      throw new CutoutError('processing_failed', `Cannot derive a side-${side} variant: Resize ${node.name ?? ''} does not take a constant size`);
    }
    if (done.has(t)) continue;
    done.add(t);
    const values = int64Values(t);
    // From a bare constant [n, c, h, w] only the spatial tail scales; from the Concat tail [h, w] all of it.
    const from = tail ? 0 : Math.max(0, values.length - 2);
    setInt64Values(t, values.map((v, i) => (i < from ? v : BigInt(scaleDim(Number(v), side, baseSide)))));
  }
  if (!resizes) {
    // A model without Resize may still be fully convolutional; the shapes below are all there is.
  }

  // Declared shapes: the spatial dims (2 and 3 of rank-4 NCHW tensors) scale the same way.
  const scaleInfo = (info: ValueInfo) => {
    const dims = info.type?.tensorType?.shape?.dim;
    if (!dims || dims.length !== 4) return;
    for (const d of dims.slice(2)) {
      if (d.dimValue === undefined || d.dimValue === null || d.dimParam) continue;
      d.dimValue = scaleDim(Number(d.dimValue.toString()), side, baseSide);
    }
  };
  for (const info of [...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])]) scaleInfo(info as ValueInfo);
  return Buffer.from(onnx.ModelProto.encode(model).finish());
}

/**
 * The quality settings: the model input side of each name, and how the image is placed on the
 * S x S grid below the model's own size: `fill` stretches it (as at 1024), `letterbox` keeps its
 * aspect and pads the short side (then the matte is cropped back to the image). Chosen from
 * measurements on the public composite set (docs/models.md, "Quality settings").
 */
export const QUALITY_PARAMS: Readonly<{ sides: Readonly<Record<Quality, number>>; fit: 'fill' | 'letterbox'; pad: 'grey' | 'copy' }> = Object.freeze({
  // `max` is `best` plus a second pass on the subject's box (zoom.ts).
  sides: Object.freeze({ fast: 512, balanced: 768, best: 1024, max: 1024 }),
  // Measured on the public set (66 images): at 768, letterbox with edge-copied padding beats the
  // stretch on every metric (IoU 0.832 vs 0.819, MAE 0.0340 vs 0.0365); at 512 it is a wash
  // (IoU 0.776 vs 0.764, MAE 0.0496 vs 0.0441), grey padding is worse (IoU 0.738).
  fit: 'letterbox',
  pad: 'copy',
});

/** Where the image sits on the model's input grid. */
export interface InputPlan {
  /** The model's input grid. */
  width: number;
  height: number;
  /** The image's rectangle on that grid (the whole grid when stretched). */
  content: { left: number; top: number; width: number; height: number };
  pad: 'grey' | 'copy';
}

/**
 * The input side for a quality: the largest side the manifest supports that is not above the
 * setting's side (the manifest's own size for `best` or when it lists nothing smaller).
 */
export function modelSide(manifest: ModelManifest, quality: Quality | undefined): number {
  const native = manifest.input.width;
  if (!quality || quality === 'best' || manifest.input.height !== native) return native;
  const want = QUALITY_PARAMS.sides[quality];
  const fits = [native, ...manifest.sides].filter((s) => s <= want);
  return fits.length ? Math.max(...fits) : native;
}

/** The input grid and the image's place on it, for an image of `width` x `height`. */
export function inputPlan(manifest: ModelManifest, quality: Quality | undefined, width: number, height: number): InputPlan {
  const side = modelSide(manifest, quality);
  if (side === manifest.input.width && side === manifest.input.height) {
    return { width: manifest.input.width, height: manifest.input.height, content: { left: 0, top: 0, width: manifest.input.width, height: manifest.input.height }, pad: QUALITY_PARAMS.pad };
  }
  if (QUALITY_PARAMS.fit === 'fill') return { width: side, height: side, content: { left: 0, top: 0, width: side, height: side }, pad: QUALITY_PARAMS.pad };
  const scale = side / Math.max(width, height);
  const w = Math.max(1, Math.min(side, Math.round(width * scale)));
  const h = Math.max(1, Math.min(side, Math.round(height * scale)));
  return { width: side, height: side, content: { left: (side - w) >> 1, top: (side - h) >> 1, width: w, height: h }, pad: QUALITY_PARAMS.pad };
}

/** True when the plan pads the image (the output and guide must be cropped back). */
export function isLetterboxed(plan: InputPlan): boolean {
  return plan.content.width !== plan.width || plan.content.height !== plan.height;
}

/** The model output and its RGB guide cut back to the image's rectangle of the plan. */
export function cropToContent(output: Float32Array, rgb: Uint8Array, plan: InputPlan): { data: Float32Array; rgb: Uint8Array; width: number; height: number } {
  if (!isLetterboxed(plan)) return { data: output, rgb, width: plan.width, height: plan.height };
  const { left, top, width, height } = plan.content;
  const data = new Float32Array(width * height);
  const guide = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const src = (top + y) * plan.width + left;
    data.set(output.subarray(src, src + width), y * width);
    guide.set(rgb.subarray(src * 3, (src + width) * 3), y * width * 3);
  }
  return { data, rgb: guide, width, height };
}
