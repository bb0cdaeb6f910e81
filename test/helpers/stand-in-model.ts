/**
 * A stand-in for the model, behind the pipeline's own seam (PipelineOptions.inference, reached
 * through startServer's `seams`): for the fast lane's API tests, whose subject is the routes,
 * billing, the store or the queue, never the matte. Its matte is a soft ellipse centred in the
 * model's input, computed in a few milliseconds, so that every image has an opaque subject in the
 * middle and transparent corners, as the real model gives for the fixtures; everything before and
 * after the model call (decode, resize, refine, compose, encode) still runs for real.
 *
 * What the model itself does (its mattes, precisions, variants, workers, upstreams) is tested on
 * the real model in the e2e lane (docs/testing.md).
 */
import { CutoutError } from '../../src/errors.js';
import type { Inference } from '../../src/pipeline/index.js';

/** Fraction of the side over which the ellipse fades from opaque to transparent. */
const EDGE = 0.06;

export class StandInInference implements Inference {
  private closed = false;
  /** Model calls made, for a test that wants to see the stand-in was used. */
  calls = 0;

  async load(): Promise<number> {
    return 0;
  }

  async run(_manifest: unknown, _tensor: Float32Array, width: number, height: number, options: { signal?: AbortSignal } = {}): Promise<{ data: Float32Array; dims: number[]; ms: number }> {
    if (this.closed) throw new CutoutError('processing_failed', 'The inference of this remover is closed');
    options.signal?.throwIfAborted();
    const started = performance.now();
    this.calls++;
    const data = new Float32Array(width * height);
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
