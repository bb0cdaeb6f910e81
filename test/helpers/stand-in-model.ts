/**
 * A stand-in for the model, behind the pipeline's own seam (PipelineOptions.inference, reached
 * through startServer's `seams`): for the fast lane's API tests, whose subject is the routes,
 * billing, the store or the queue, never the matte. Its matte is a soft ellipse centred in the
 * model's input, computed in a few milliseconds, so that every image has an opaque subject in the
 * middle and transparent corners, as the real model gives for the fixtures, and an image of one
 * flat colour has none (the real model's answer to a blank image); everything before and
 * after the model call (decode, resize, refine, compose, encode) still runs for real.
 *
 * What the model itself does (its mattes, precisions, variants, workers, upstreams) is tested on
 * the real model in the e2e lane (docs/testing.md).
 */
import { CutoutError } from '../../src/errors.js';
import type { Inference } from '../../src/pipeline/index.js';

/** Resolves after `ms`, or rejects with the signal's reason once it aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}

/** Whether the input tensor is (nearly) one value throughout: a blank image. */
function flat(tensor: Float32Array): boolean {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < tensor.length; i += 7) {
    min = Math.min(min, tensor[i]);
    max = Math.max(max, tensor[i]);
  }
  return max - min < 0.02;
}

/** Fraction of the side over which the ellipse fades from opaque to transparent. */
const EDGE = 0.06;

export class StandInInference implements Inference {
  private closed = false;
  /** Model calls begun, for a test that waits for one to be under way or checks the stand-in ran. */
  calls = 0;

  /**
   * `ms`: how long each call takes (a timer, no CPU), for the tests whose subject is what
   * happens while a model call runs (a full queue, the sync timeout, health during inference).
   */
  constructor(private readonly options: { ms?: number } = {}) {}

  async load(): Promise<number> {
    return 0;
  }

  async run(_manifest: unknown, tensor: Float32Array, width: number, height: number, options: { signal?: AbortSignal } = {}): Promise<{ data: Float32Array; dims: number[]; ms: number }> {
    if (this.closed) throw new CutoutError('processing_failed', 'The inference of this remover is closed');
    options.signal?.throwIfAborted();
    const started = performance.now();
    this.calls++;
    if (this.options.ms) await sleep(this.options.ms, options.signal);
    const data = new Float32Array(width * height);
    // An image of one flat colour has no subject, as the real model finds (unknown_foreground).
    if (flat(tensor)) return { data, dims: [1, 1, height, width], ms: performance.now() - started };
    const cx = (width - 1) / 2;
    const cy = (height - 1) / 2;
    const rx = width * 0.36;
    const ry = height * 0.42;
    for (let y = 0; y < height; y++) {
      const dy = (y - cy) / ry;
      for (let x = 0; x < width; x++) {
        const dx = (x - cx) / rx;
        // 1 inside the ellipse, 0 beyond it plus EDGE, linear between: a matte with soft edges.
        const r = Math.sqrt(dx * dx + dy * dy);
        data[y * width + x] = Math.min(1, Math.max(0, (1 + EDGE - r) / EDGE));
      }
    }
    return { data, dims: [1, 1, height, width], ms: performance.now() - started };
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  /** The model runs in no session of this process: no model memory to budget for. */
  weightsHere(): null {
    return null;
  }
}
