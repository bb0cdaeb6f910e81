/**
 * The work of one image, in order: bytes -> format and limits -> orientation and size -> model ->
 * matte -> compose -> encode. Called by the pipeline object (index.ts), which owns the model and
 * its call; loaded on its first image, so that a pipeline can be made and its model loaded
 * before sharp is (cold start, docs/internals.md).
 */
import { checkAborted } from './abort.js';
import { compose } from './compose.js';
import { openImage, openRawPixels } from './decode.js';
import type { ModelManifest } from '../toolchain/manifest.js';
import { keptAlpha, readMetadata } from './kept-alpha.js';
import { decontaminateEdges, edgeParamsOf } from './edges.js';
import { COLLECT_BEFORE_PIXELS, collectGarbage } from './memory.js';
import type { MatteSignals } from './confidence.js';
import { frameMatte, planOutput, resultOf, type ImageModel } from './frame.js';
import type { RawPixels, RemoveRequest, RemoveResult, StageTimings } from './types.js';

// Where they were before frame.ts took them: the int8 calibration and the memory test import them here.
export { decodeOverlapMaxPixels, modelInput, type ImageModel, type RunModel } from './frame.js';

/**
 * Removes the background of one image. Throws CutoutError with the API's codes:
 * unsupported_format, image_too_large, invalid_request (4 MP rule), no_subject_detected,
 * processing_failed; an aborted call rejects with its AbortError.
 */
export async function removeOne(
  manifest: ModelManifest, model: ImageModel, input: Buffer | RawPixels, req: RemoveRequest,
  opts: { signal?: AbortSignal; afterModel?: () => void; onSignals?: (signals: MatteSignals) => void },
): Promise<RemoveResult> {
  const started = performance.now();
  const timings: StageTimings = { decode: 0, preprocess: 0, inference: 0, postprocess: 0, encode: 0, confidence: 0 };
  checkAborted(opts.signal);

  let t = performance.now();
  const src = Buffer.isBuffer(input) ? await openImage(input) : openRawPixels(input);
  if (src.frames > 1 && req.animation !== 'first') {
    const { removeAnimation } = await import('./animation.js');
    return removeAnimation(manifest, model, src, req, { ...opts, started, timings });
  }
  const { resolvedSize, out, roiBox } = planOutput(src.probe, req);
  checkAborted(opts.signal);
  if (out.width * out.height >= COLLECT_BEFORE_PIXELS) collectGarbage();

  if (req.keepAlpha === 'auto') {
    const kept = await keptAlpha(src, out.width, out.height);
    if (kept) {
      // The input's own matte: no model run, nothing to estimate at its edges.
      timings.decode = performance.now() - t;
      opts.afterModel?.();
      checkAborted(opts.signal);
      t = performance.now();
      const composed = await compose(kept.rgb, kept.alpha, out.width, out.height, { ...req, roiBox, metadata: req.keepMetadata ? await readMetadata(src) : undefined });
      timings.encode = performance.now() - t;
      return resultOf(composed, resolvedSize, src.probe, { confidence: 1, frames: 1 }, started, timings);
    }
  }

  const { rgb, alpha, confidence } = await frameMatte(manifest, model, src, out, req, timings, opts);
  t = performance.now();
  // Soft-edge colours are estimated for every output that shows colours (a transparent cutout,
  // or one flattened onto a new colour); the matte alone has none.
  if (req.decontaminate !== false && !req.mask) decontaminateEdges(rgb, alpha, out.width, out.height, edgeParamsOf(req.edgeParams));
  timings.postprocess += performance.now() - t;
  checkAborted(opts.signal);

  t = performance.now();
  const composed = await compose(rgb, alpha, out.width, out.height, { ...req, roiBox, metadata: req.keepMetadata ? await readMetadata(src) : undefined });
  timings.encode = performance.now() - t;

  return resultOf(composed, resolvedSize, src.probe, { confidence, frames: 1 }, started, timings);
}
