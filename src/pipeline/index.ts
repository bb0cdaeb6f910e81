/**
 * The one core pipeline as an object made with its options (`createPipeline`): its model, default
 * precision, data directory, model call (local worker thread or upstream, chosen once) and
 * preparation events. The CLI, the sync route, the job workers, the model server and the
 * library's removers each make one and call it; two live side by side in one process. What it
 * does to an image is in process.ts. It knows nothing of HTTP, SQL or credits.
 *
 * Light on purpose: sharp loads with the first image (process.ts), so a pipeline made at start
 * can begin loading its model while the caller loads the rest (cold start, docs/internals.md).
 */
import { CutoutError } from '../errors.js';
import type { Precision, Quality } from '../options.js';
import { checkAborted, unlessAborted } from './abort.js';
import { resolveModel, type ModelManifest } from '../toolchain/manifest.js';
import { LocalInference, UpstreamModelCall, type Inference, type ModelOutput, type RemoteInference } from './model.js';
import { modelSide } from '../toolchain/variants.js';
import type { ModelFilesContext, PreparationEvent } from '../toolchain/weights.js';
import type { ImageProbe, Pipeline, RawPixels, RemoveRequest, RemoveResult } from './types.js';

export { resolveModel, listManifests } from '../toolchain/manifest.js';
export { modelSide } from '../toolchain/variants.js';
export type { Inference, RemoteInference } from './model.js';
export type { PreparationEvent } from '../toolchain/weights.js';
export type * from './types.js';

/** The model a pipeline runs when its options name none. */
export const DEFAULT_MODEL = 'isnet-medium';

export interface PipelineOptions {
  /** A model name from `cutout models list`, or an .onnx file with its manifest; default isnet-medium. */
  model?: string;
  /** The precision of a request that names none; default `auto`. */
  precision?: Precision;
  /** The data directory: the model cache's home when the package's folder is read-only. */
  dataDir?: string;
  /** The model call elsewhere (an Open Inference Protocol connection); default: a local worker thread. */
  upstream?: RemoteInference;
  /**
   * The model call itself, given whole (takes precedence over `upstream`): for an embedding that
   * runs the model its own way, and for tests whose subject is not the model (a stand-in that
   * answers in a millisecond). Chosen once, here, like the other two; closed with the pipeline.
   */
  inference?: Inference;
  /** Intra-op threads of each local session (default: every core, or CUTOUT_THREADS). */
  threads?: number;
  /** Local inference worker threads, each with its own session (default 1; see inferenceSplit in config.ts). */
  inferenceWorkers?: number;
  /** Told when a model file has to be built before its first use (nothing is ever downloaded). */
  onPreparation?: (event: PreparationEvent) => void;
}

/** Makes a pipeline; its model is checked now (an unknown name throws invalid_request). */
export function createPipeline(options: PipelineOptions = {}): CutoutPipeline {
  return new CutoutPipeline(options);
}

export class CutoutPipeline implements Pipeline {
  readonly manifest: ModelManifest;
  readonly precision: Precision;
  private readonly inference: Inference;
  private inFlight = 0;
  private closing: Promise<void> | null = null;

  constructor(options: PipelineOptions = {}) {
    this.manifest = resolveModel(options.model ?? DEFAULT_MODEL);
    this.precision = options.precision ?? 'auto';
    const files: ModelFilesContext = { dataDir: options.dataDir, onPreparation: options.onPreparation };
    this.inference = options.inference ?? (options.upstream ? new UpstreamModelCall(options.upstream) : new LocalInference(files, { workers: options.inferenceWorkers, threads: options.threads }));
  }

  async probeImage(bytes: Buffer): Promise<ImageProbe> {
    return (await import('./decode.js')).probeImage(bytes);
  }

  /**
   * Readies the model for a quality setting ahead of the first image (servers, benchmarks, a
   * remover's preload): builds or checks its file and loads its session. The time it took, ms.
   */
  loadModel(options: { quality?: Quality; side?: number; precision?: Precision } = {}): Promise<number> {
    const side = options.side ?? modelSide(this.manifest, options.quality ?? 'best');
    return this.inference.load(this.manifest, side, options.precision ?? this.precision);
  }

  /**
   * Runs the model on a prepared NCHW tensor; the tensor's buffer may be transferred (unusable
   * afterwards). A square tensor of another side than the manifest's input runs on that side's
   * variant. An abort rejects at once; a run in flight finishes and its result is dropped.
   */
  async runModel(
    tensor: Float32Array, width: number, height: number,
    options: { precision?: Precision; sourcePixels?: number; signal?: AbortSignal } = {},
  ): Promise<{ data: Float32Array; width: number; height: number; ms: number }> {
    const manifest = this.manifest;
    const native = width === manifest.input.width && height === manifest.input.height;
    if (!native && width !== height) throw new CutoutError('processing_failed', `Model input ${width}x${height} is neither the model's size nor square`);
    checkAborted(options.signal);
    const out: ModelOutput = await unlessAborted(
      this.inference.run(manifest, tensor, width, height, { precision: options.precision ?? this.precision, sourcePixels: options.sourcePixels, signal: options.signal }),
      options.signal,
    );
    const { dims } = out;
    // A variant's rewrite is checked on every run: its output must have the side asked for.
    if (!native && (dims[dims.length - 1] !== width || dims[dims.length - 2] !== height)) {
      throw new CutoutError('processing_failed', `Model output is ${dims.join('x')}, expected ${width}x${height}`);
    }
    return { data: out.data, width: dims[dims.length - 1], height: dims[dims.length - 2], ms: out.ms };
  }

  /** Removes the background of one image (process.ts): the API's error codes, or the signal's AbortError. */
  async removeBackground(input: Buffer | RawPixels, req: RemoveRequest, opts: RemoveCallOptions = {}): Promise<RemoveResult> {
    if (this.closing) throw new CutoutError('invalid_request', 'This remover is closed');
    this.inFlight++;
    try {
      const { removeOne } = await import('./process.js');
      const model = {
        run: this.runModel.bind(this),
        weightsHere: (side: number, precision: Precision | undefined) => this.inference.weightsHere(this.manifest, side, precision ?? this.precision),
      };
      return await removeOne(this.manifest, model, input, req, opts);
    } finally {
      this.inFlight--;
    }
  }

  /**
   * No further model calls: the local worker's sessions are let go once the calls in flight
   * have returned, while images past their model call finish (the CLI's early release).
   */
  releaseModel(): Promise<void> {
    return this.inference.close();
  }

  /** Refuses new calls, waits for those in flight, then frees the inference. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      while (this.inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 10));
      await this.inference.close();
    })();
    return this.closing;
  }
}

export interface RemoveCallOptions {
  signal?: AbortSignal;
  /** Called once this image needs the model no more (its post-processing still to come). */
  afterModel?: () => void;
  /** Handed the matte's signals behind the confidence (`npm run bench:confidence` fits on them). */
  onSignals?: (signals: import('./confidence.js').MatteSignals) => void;
}

