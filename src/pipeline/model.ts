/**
 * The model call, the one seam between the pipeline and inference: a local worker thread
 * (inference-thread.ts, which holds the sessions, one per model file, created lazily, and runs one
 * inference at a time) or a remote inference server, chosen once, when the pipeline is made.
 * Callers get a promise; the event loop stays free for progress display and HTTP.
 */
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import type { Precision } from '../options.js';
import type { ModelManifest } from '../toolchain/manifest.js';
import { ensureModelAt, type ModelFilesContext } from '../toolchain/weights.js';
import { resolvePrecision } from '../toolchain/int8.js';
import { acquireInferenceThread, type ThreadLease } from './inference-thread.js';

/**
 * Whether a run uses onnxruntime's CPU memory arena. On by default: warm runs measured about 1.4x
 * faster with it. Off for images of 16 MP and more at fp32: that arena's retained 0.7 GB beside a
 * 50 MP image's own buffers peaked at 1.54 GB, over the 1.5 GB budget, against 1.03 GB without
 * it. On at every size at int8, whose arena holds about half as much: three 50 MP images in one
 * process peaked at 856-876 MB with it against 787-803 MB without, and each model run took about
 * 0.45 s less (no session made again without the arena, no working memory faulted in afresh;
 * docs/benchmarks.md, "Large photos at int8"). CUTOUT_ARENA=0 or 1 forces it (the bench).
 */
export function arenaFor(sourcePixels: number, weights: 'fp32' | 'int8'): boolean {
  if (process.env.CUTOUT_ARENA === '0') return false;
  if (process.env.CUTOUT_ARENA === '1') return true;
  return weights === 'int8' || sourcePixels < LIMITS.arenaMaxSourcePixels;
}

/** What one model call gives: the raw output and its dims ([1, 1, H, W]). */
export interface ModelOutput {
  data: Float32Array;
  dims: number[];
  /** Time of the call itself (the session run, or the round trip to an upstream), ms. */
  ms: number;
}

export interface ModelCallOptions {
  /** The precision asked for (a request's, else the pipeline's); `auto` is resolved by the local call. */
  precision: Precision;
  /** The source image's pixels: very large images run without the memory arena at fp32 (arenaFor). */
  sourcePixels?: number;
  signal?: AbortSignal;
}

/** The seam: what the pipeline calls, whichever side runs the model. */
export interface Inference {
  /** Readies the model for input side `side` ahead of the first image; the time it took, ms. */
  load(manifest: ModelManifest, side: number, precision: Precision): Promise<number>;
  /** Runs the model on an NCHW tensor; the tensor's buffer may be transferred (unusable afterwards). */
  run(manifest: ModelManifest, tensor: Float32Array, width: number, height: number, options: ModelCallOptions): Promise<ModelOutput>;
  /** Frees what the inference holds once its calls in flight have returned; later calls reject. */
  close(): Promise<void>;
  /**
   * The weights a call at `side` and `precision` runs in this process (`auto` resolved), or null
   * when the model runs elsewhere: how much of this process's memory the run takes (process.ts).
   */
  weightsHere(manifest: ModelManifest, side: number, precision: Precision): 'fp32' | 'int8' | null;
}

/**
 * The model call when it runs elsewhere (`serve --upstream`, a remover's `upstream`): the
 * Open Inference Protocol client (oip/client.ts), connected with the model and precision it asks for.
 */
export interface RemoteInference {
  /** The precision of the weights the connection calls (default fp32): an upstream cannot switch per request. */
  readonly precision?: 'fp32' | 'int8';
  /** The matte for an NCHW tensor, with its dims ([1, 1, H, W]); `ms`: the round trip. */
  run(manifest: ModelManifest, tensor: Float32Array, width: number, height: number, signal?: AbortSignal): Promise<{ data: Float32Array; dims: number[]; ms: number }>;
}

/** The model in this process: a hold on a shared inference thread, and the model files it loads. */
export class LocalInference implements Inference {
  /** One lease per inference worker: each worker thread holds its own sessions and runs one inference at a time. */
  private readonly leases: ThreadLease[];
  /** Model files by manifest, side and precision: the checks behind them run once per pipeline. */
  private readonly files = new Map<string, Promise<string>>();

  /**
   * `split.threads`: intra-op threads of each session (default: every core, or CUTOUT_THREADS);
   * `split.workers`: inference worker threads, each with its own session (default 1).
   */
  constructor(private readonly modelFiles: ModelFilesContext = {}, split: { workers?: number; threads?: number } = {}) {
    this.leases = Array.from({ length: Math.max(1, split.workers ?? 1) }, (_, slot) => acquireInferenceThread(split.threads, slot));
  }

  /** The worker with the fewest calls in flight (the first on a tie, so one image alone always runs on the same). */
  private leastBusy(): ThreadLease {
    return this.leases.reduce((best, lease) => (lease.busy < best.busy ? lease : best));
  }

  /** The weights a call runs (`auto` resolved once) and the file that holds them. */
  private modelFile(manifest: ModelManifest, side: number, precision: Precision): { weights: 'fp32' | 'int8'; path: Promise<string> } {
    const weights = this.weightsHere(manifest, side, precision);
    const key = `${manifest.name}:${manifest.sha256}:${manifest.dir}:${side}:${weights}`;
    let file = this.files.get(key);
    if (!file) {
      file = ensureModelAt(manifest, side, weights, this.modelFiles);
      file.catch(() => this.files.delete(key));
      this.files.set(key, file);
    }
    return { weights, path: file };
  }

  async load(manifest: ModelManifest, side: number, precision: Precision): Promise<number> {
    const { weights, path: file } = this.modelFile(manifest, side, precision);
    const modelPath = await file;
    // Every worker loads its session: a first image on the second worker must not pay for it.
    const arena = arenaFor(0, weights);
    const replies = await Promise.all(this.leases.map((lease) => lease.send({ kind: 'load', modelPath, inputName: manifest.input.name, outputName: manifest.output.name, arena })));
    return Math.max(...replies.map((r) => r.ms));
  }

  async run(manifest: ModelManifest, tensor: Float32Array, width: number, height: number, options: ModelCallOptions): Promise<ModelOutput> {
    const { weights, path: file } = this.modelFile(manifest, width, options.precision);
    const modelPath = await file;
    const r = await this.leastBusy().send(
      { kind: 'run', modelPath, inputName: manifest.input.name, outputName: manifest.output.name, dims: [1, 3, height, width], data: tensor, arena: arenaFor(options.sourcePixels ?? 0, weights) },
      [tensor.buffer as ArrayBuffer],
    );
    return { data: r.data!, dims: r.dims!, ms: r.ms };
  }

  async close(): Promise<void> {
    await Promise.all(this.leases.map((lease) => lease.release()));
  }

  weightsHere(manifest: ModelManifest, side: number, precision: Precision): 'fp32' | 'int8' {
    return resolvePrecision(manifest, precision, side);
  }
}

/** A remote inference as the pipeline's model call. Closing it only refuses later calls. */
export class UpstreamModelCall implements Inference {
  private closed = false;
  constructor(private readonly remote: RemoteInference) {}

  async load(): Promise<number> {
    return 0;
  }

  async run(manifest: ModelManifest, tensor: Float32Array, width: number, height: number, options: ModelCallOptions): Promise<ModelOutput> {
    if (this.closed) throw new CutoutError('processing_failed', 'The inference of this remover is closed');
    // A request's precision must be the one the upstream's weights have; `auto` takes what runs there.
    const served = this.remote.precision ?? 'fp32';
    if (options.precision !== 'auto' && options.precision !== served) {
      throw new CutoutError('invalid_request', `precision=${options.precision} is not available: the inference server runs the ${served} weights it was given; use auto or ${served}`);
    }
    return this.remote.run(manifest, tensor, width, height, options.signal);
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  weightsHere(): null {
    return null;
  }
}
