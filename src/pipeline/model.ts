/**
 * The model call, the one seam between the pipeline and inference: the local worker thread
 * (inference-thread.ts, which holds the sessions, one per model file, created lazily, and runs one
 * inference at a time) or a remote inference server, chosen once. Callers get a promise; the
 * event loop stays free for progress display and HTTP.
 */
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import type { ModelManifest } from './manifest.js';
import { ensureModelAt } from './weights.js';
import { resolvePrecision } from './int8.js';
import { assertPrecisionServed, type Precision } from '../options.js';
import { send, startInferenceThread } from './inference-thread.js';

export { drainModels, stopModels } from './inference-thread.js';

/**
 * Whether a run uses onnxruntime's CPU memory arena. On by default: warm runs measured about 1.4x
 * faster with it. Off for images of 16 MP and more: the arena's retained 0.7 GB beside a 50 MP
 * image's own buffers peaked at 1.54 GB, over the 1.5 GB budget, against 1.03 GB without it (the
 * one-image CLI gains nothing from it there either). CUTOUT_ARENA=0 or 1 forces it (the bench).
 */
export function arenaFor(sourcePixels: number): boolean {
  if (process.env.CUTOUT_ARENA === '0') return false;
  if (process.env.CUTOUT_ARENA === '1') return true;
  return sourcePixels < LIMITS.arenaMaxSourcePixels;
}

/**
 * Starts the inference worker ahead of the first model call, so that its thread's start and
 * onnxruntime's loading (about 75 ms) overlap the caller's own start-up: the CLI calls it before
 * it reads its configuration and loads sharp and the store (cold start, README). Does nothing
 * when the model runs upstream.
 */
export function startInferenceWorker(): void {
  if (!remote) startInferenceThread();
}

/**
 * Loads (and verifies) a model's session ahead of the first image: for servers and benchmarks.
 * `side`: the input side of a variant (default: the manifest's input size).
 */
export async function loadModel(manifest: ModelManifest, side = manifest.input.width, precision?: Precision): Promise<number> {
  const modelPath = await ensureModelAt(manifest, side, resolvePrecision(manifest, precision, side));
  const r = await send({ kind: 'load', modelPath, inputName: manifest.input.name, outputName: manifest.output.name, arena: arenaFor(0) });
  return r.ms;
}

export interface InferenceOutput {
  data: Float32Array;
  width: number;
  height: number;
  /** Time inside the worker (session run), ms. */
  ms: number;
}

/**
 * Runs the model on a prepared NCHW tensor; the tensor's buffer is transferred (unusable afterwards).
 * A square tensor of another side than the manifest's input runs on that side's variant.
 */
export async function runModel(
  manifest: ModelManifest, tensor: Float32Array, width: number, height: number, sourcePixels = 0, precision?: Precision, signal?: AbortSignal,
): Promise<InferenceOutput> {
  const native = width === manifest.input.width && height === manifest.input.height;
  if (!native && width !== height) throw new CutoutError('processing_failed', `Model input ${width}x${height} is neither the model's size nor square`);
  let dims: number[];
  let out: { data: Float32Array; ms: number };
  if (remote) {
    assertPrecisionServed(precision, true);
    const r = await remote.run(manifest, tensor, width, height, signal);
    dims = r.dims;
    out = r;
  } else {
    const modelPath = await ensureModelAt(manifest, width, resolvePrecision(manifest, precision, width));
    const r = await send(
      { kind: 'run', modelPath, inputName: manifest.input.name, outputName: manifest.output.name, dims: [1, 3, height, width], data: tensor, arena: arenaFor(sourcePixels) },
      [tensor.buffer as ArrayBuffer],
    );
    dims = r.dims!;
    out = { data: r.data!, ms: r.ms };
  }
  // A variant's rewrite is checked on every run: its output must have the side asked for.
  if (!native && (dims[dims.length - 1] !== width || dims[dims.length - 2] !== height)) {
    throw new CutoutError('processing_failed', `Model output is ${dims.join('x')}, expected ${width}x${height}`);
  }
  return { data: out.data, width: dims[dims.length - 1], height: dims[dims.length - 2], ms: out.ms };
}

/**
 * The model call when it runs elsewhere (`serve --upstream`): set once at start, before the
 * first image. The pipeline above runModel does not know which one runs.
 */
export interface RemoteInference {
  /** The matte for an NCHW tensor, with its dims ([1, 1, H, W]); `ms`: the round trip. */
  run(manifest: ModelManifest, tensor: Float32Array, width: number, height: number, signal?: AbortSignal): Promise<{ data: Float32Array; dims: number[]; ms: number }>;
}

let remote: RemoteInference | null = null;

/** Sends every model call to `inference` (null: back to the local worker thread). */
export function useRemoteInference(inference: RemoteInference | null): void {
  remote = inference;
}

/** Whether model calls go to a remote inference server (set by `useRemoteInference`). */
export function usesRemoteInference(): boolean {
  return remote !== null;
}

