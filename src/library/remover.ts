/**
 * The library: `createRemover(options)` makes a remover over a pipeline of its own (its model,
 * precision, model call and data directory); `removeBackground(input, options)` uses one shared
 * remover, made on first use. The same pipeline as the CLI, the server and the model server.
 */
import pLimit from 'p-limit';
import { DEFAULTS } from '../config.js';
import { readBgImage } from '../bg-image.js';
import { CutoutError, abortError } from '../errors.js';
import { unlessAborted } from '../pipeline/abort.js';
import { createPipeline, type CutoutPipeline } from '../pipeline/index.js';
import { resultFieldsOf, type ResultFields } from '../result-fields.js';
import { readImageInput, type ImageInput } from './input.js';
import { checkRemoverOptions, removeRequest, type OutputFormat, type RemoveOptions, type RemoverOptions } from './options.js';

/** An input as read from its bytes: its format, its size after EXIF orientation, and its frames. */
export interface ImageProbe {
  format: 'jpeg' | 'png' | 'webp' | 'gif' | 'bmp' | 'tiff' | 'avif' | 'heic' | 'raw';
  width: number;
  height: number;
  /** Frames of an animated GIF, WebP or PNG; 1 for a still picture. */
  frames: number;
}

/**
 * What a call gives: the image, and what the result says of itself (ResultFields: its `width` and
 * `height`, the subject's box, its `confidence`, its `processingMs`), the same fields as every other door.
 */
export interface CutoutResult extends ResultFields {
  /** The encoded image, or its pixels when `format` is `raw`. */
  data: Buffer;
  /** The encoding written (`auto` resolved to `png` or `jpg`). */
  format: OutputFormat | 'zip';
  /** Channels of `data`: with `raw`, 4 (RGBA) or 1 (a mask); else those of the encoded image. */
  channels: 1 | 3 | 4;
  /** `image/png`, `image/webp`, `image/jpeg`, or `application/octet-stream` for raw pixels. */
  contentType: string;
  /** The input as read from its bytes: format and size after EXIF orientation. */
  input: ImageProbe;
}

export interface Remover {
  /** Removes the background of one image. Rejects with a CutoutError, or an AbortError when `signal` aborts. */
  remove(input: ImageInput, options?: RemoveOptions): Promise<CutoutResult>;
  /** Waits for the calls in flight, then frees the model's worker and sessions; later calls reject. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Anything thrown, as the library promises it: a CutoutError with an API code, or an AbortError. */
function asLibraryError(err: unknown): Error {
  if (err instanceof CutoutError || (err instanceof Error && err.name === 'AbortError')) return err;
  return new CutoutError('processing_failed', `Processing failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}

class PipelineRemover implements Remover {
  private readonly limit: ReturnType<typeof pLimit>;
  private closed = false;
  /** Calls accepted and not yet settled: close waits for them, queued ones included. */
  private readonly calls = new Set<Promise<unknown>>();

  constructor(private readonly pipeline: CutoutPipeline, concurrency: number) {
    this.limit = pLimit(concurrency);
  }

  async remove(input: ImageInput, options?: RemoveOptions): Promise<CutoutResult> {
    try {
      if (this.closed) throw new CutoutError('invalid_request', 'This remover is closed');
      const request = removeRequest(options);
      const signal = options?.signal;
      if (signal?.aborted) throw abortError(signal);
      // A call waiting for its turn is aborted at once; its turn, when it comes, does nothing.
      const call = this.limit(() => this.run(input, request, signal));
      this.calls.add(call);
      call.then(() => this.calls.delete(call), () => this.calls.delete(call));
      return await unlessAborted(call, signal);
    } catch (err) {
      throw asLibraryError(err);
    }
  }

  private async run(input: ImageInput, request: ReturnType<typeof removeRequest>, signal?: AbortSignal): Promise<CutoutResult> {
    if (signal?.aborted) throw abortError(signal);
    const bytes = await readImageInput(input, signal);
    const bgImageData = request.bgImage ? await readBgImage(request.bgImage) : undefined;
    const r = await this.pipeline.removeBackground(bytes, { ...request, bgImageData }, { signal });
    return { data: r.data, ...resultFieldsOf(r), format: r.format, channels: r.channels, contentType: r.contentType, input: r.input };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.calls]);
    await this.pipeline.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * A remover with its own model, precision and model call (a local worker thread, or an upstream
 * server checked now). Two removers live side by side; the local ones share a worker thread and,
 * for the same model file, its session. Rejects with invalid_request for a bad option or model.
 */
export async function createRemover(options: RemoverOptions = {}): Promise<Remover> {
  try {
    const o = checkRemoverOptions(options);
    let upstream;
    if (o.upstream) {
      const { connectConfiguredUpstream } = await import('../oip/client.js');
      upstream = await connectConfiguredUpstream({
        upstream: o.upstream, upstreamModel: o.upstreamModel ?? null, upstreamToken: o.upstreamToken ?? null,
        model: o.model ?? 'isnet-medium', workers: o.concurrency, precision: o.precision,
      });
    }
    // The cores split as for the CLI, serve and model-server (config.ts, inference-split.ts).
    const pipeline = createPipeline({
      model: o.model, precision: o.precision, dataDir: o.dataDir, upstream, onPreparation: o.onProgress,
      inferenceWorkers: DEFAULTS.inferenceWorkers, threads: DEFAULTS.inferenceThreads,
    });
    if (o.preload) {
      try {
        await pipeline.loadModel();
      } catch (err) {
        await pipeline.close();
        throw err;
      }
    }
    return new PipelineRemover(pipeline, o.concurrency);
  } catch (err) {
    throw asLibraryError(err);
  }
}

/**
 * The shared remover of `removeBackground`: made on first use with the defaults. Idle, it holds
 * nothing that keeps Node alive (the worker thread is unreferenced between calls), so a script
 * that calls `removeBackground` exits by itself when it is done.
 */
let shared: Promise<Remover> | null = null;

/** Removes the background of one image with the shared remover (see createRemover for options per remover). */
export function removeBackground(input: ImageInput, options?: RemoveOptions): Promise<CutoutResult> {
  shared ??= createRemover();
  shared.catch(() => {
    shared = null;
  });
  return shared.then((remover) => remover.remove(input, options));
}
