/**
 * One weights file for the fp32 graphs of a model (issue 43: the container image under 1 GB). The
 * runnable fp32 model and its input-side variants (variants.ts) differ only in a few small
 * constants and declared shapes: their large initializers are the same 176 MB. Each graph is
 * stored with those initializers as ONNX external data (`location`, `offset`, `length`), all
 * pointing into one file at the same offsets, so the weights are on disk once instead of once per
 * graph. onnxruntime resolves `location` against the folder of the model file when a session is
 * created from its path, which is how inference-worker.ts creates every session.
 *
 * The model a graph stands for is still the self-contained one: `inlineWeights` gives its bytes
 * back exactly (protobufjs writes fields in a fixed order, and the split only moves `raw_data`),
 * so its sha256, the int8 calibration's `fp32Sha256` and the graph rewrites see the same bytes
 * as before the split.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
type Onnx = typeof import('onnx-proto').onnx;
type Tensor = InstanceType<Onnx['TensorProto']>;

/** Initializers below this size stay in the graph (shapes, scales, the Resize sizes a variant rewrites). */
export const EXTERNAL_MIN_BYTES = 1024;

/**
 * Offsets in the weights file are multiples of the page size, so that onnxruntime may map a
 * tensor straight from the file rather than read it into a buffer of its own.
 */
export const EXTERNAL_ALIGN = 4096;

/** TensorProto.DataLocation.EXTERNAL */
const EXTERNAL = 1;

function onnx(): Onnx {
  return (require('onnx-proto') as typeof import('onnx-proto')).onnx;
}

function entry(t: Tensor, key: string): string | undefined {
  return (t.externalData ?? []).find((e) => e.key === key)?.value ?? undefined;
}

/**
 * The graph with every initializer of at least EXTERNAL_MIN_BYTES moved to a weights file named
 * `location` (a file name, resolved beside the graph), in graph order at aligned offsets; null
 * when the model has none to move. The layout depends only on the initializers' order and sizes,
 * so two graphs with the same large initializers produce the same weights bytes.
 */
export function splitWeights(modelBytes: Uint8Array, location: string): { graph: Buffer; weights: Buffer } | null {
  const model = onnx().ModelProto.decode(modelBytes);
  const moved: { tensor: Tensor; offset: number; data: Uint8Array }[] = [];
  let end = 0;
  for (const t of (model.graph?.initializer ?? []) as Tensor[]) {
    if (t.dataLocation === EXTERNAL || !t.rawData || t.rawData.length < EXTERNAL_MIN_BYTES) continue;
    const offset = Math.ceil(end / EXTERNAL_ALIGN) * EXTERNAL_ALIGN;
    moved.push({ tensor: t, offset, data: t.rawData });
    end = offset + t.rawData.length;
  }
  if (moved.length === 0) return null;
  const weights = Buffer.alloc(end);
  for (const { tensor, offset, data } of moved) {
    weights.set(data, offset);
    tensor.rawData = new Uint8Array(0);
    tensor.dataLocation = EXTERNAL;
    tensor.externalData = [
      { key: 'location', value: location },
      { key: 'offset', value: String(offset) },
      { key: 'length', value: String(data.length) },
    ] as Tensor['externalData'];
  }
  return { graph: Buffer.from(onnx().ModelProto.encode(model).finish()), weights };
}

/** The weights files a graph's initializers point into (as written in the graph), none for a self-contained model. */
export function externalLocations(graphBytes: Uint8Array): string[] {
  const model = onnx().ModelProto.decode(graphBytes);
  const out = new Set<string>();
  for (const t of (model.graph?.initializer ?? []) as Tensor[]) {
    if (t.dataLocation === EXTERNAL) out.add(entry(t, 'location') ?? '');
  }
  return [...out];
}

/**
 * The self-contained model of a graph whose initializers point into weights files: `read(location)`
 * gives a weights file's bytes. The graph's own bytes when nothing is external.
 */
export function inlineWeights(graphBytes: Uint8Array, read: (location: string) => Uint8Array): Uint8Array {
  const model = onnx().ModelProto.decode(graphBytes);
  const external = ((model.graph?.initializer ?? []) as Tensor[]).filter((t) => t.dataLocation === EXTERNAL);
  if (external.length === 0) return graphBytes;
  const files = new Map<string, Uint8Array>();
  for (const t of external) {
    const location = entry(t, 'location');
    const offset = Number(entry(t, 'offset') ?? 0);
    const length = Number(entry(t, 'length'));
    if (!location || !Number.isSafeInteger(offset) || !Number.isSafeInteger(length)) throw new Error(`initializer ${t.name} has incomplete external data`);
    let file = files.get(location);
    if (!file) files.set(location, (file = read(location)));
    if (offset + length > file.length) throw new Error(`initializer ${t.name} lies past the end of ${location}`);
    t.rawData = file.subarray(offset, offset + length);
    t.externalData = [];
    // Unset rather than DEFAULT: the self-contained model never wrote the field.
    delete (t as { dataLocation?: unknown }).dataLocation;
  }
  return onnx().ModelProto.encode(model).finish();
}

/** The self-contained bytes of a model file (its weights files read from beside it, a name without folders only). */
export function readModelBytes(file: string): Buffer {
  const bytes = fs.readFileSync(file);
  const inlined = inlineWeights(bytes, (location) => {
    if (path.basename(location) !== location) throw new Error(`${file}: external data outside its folder (${location})`);
    return fs.readFileSync(path.join(path.dirname(file), location));
  });
  return inlined === bytes ? bytes : Buffer.from(inlined.buffer, inlined.byteOffset, inlined.byteLength);
}
