/**
 * The one core pipeline: bytes -> format and limits -> orientation and size -> model -> matte ->
 * compose -> encode. The CLI, the sync route and the job workers all call `removeBackground`.
 * It knows nothing of HTTP, SQL or credits.
 */
import { CutoutError } from '../errors.js';
import { CONTENT_TYPES } from '../options.js';
import { compose } from './compose.js';
import { decodeError, decodeRgb, openImage, orientedRgb, outputSize, resolveSize } from './decode.js';
import { resolveModel, type ModelManifest } from './manifest.js';
import { rgbToTensor } from './matte.js';
import { buildMatte, decontaminateEdges } from './edges.js';
import { runModel } from './model.js';
import { COLLECT_BEFORE_PIXELS, collectGarbage } from './memory.js';
import { cropToContent, inputPlan, isLetterboxed, type InputPlan } from './variants.js';
import type { RemoveRequest, RemoveResult, StageTimings } from './types.js';

export { probeImage } from './decode.js';
export { loadModel, stopModels } from './model.js';
export { resolveModel, listManifests } from './manifest.js';
export type * from './types.js';

let defaultModel = 'isnet-medium';
/** Sets the model used when a request names none (from config). */
export function setDefaultModel(name: string): void {
  defaultModel = name;
}

const manifests = new Map<string, ModelManifest>();
function manifestFor(name: string): ModelManifest {
  let m = manifests.get(name);
  if (!m) {
    m = resolveModel(name);
    manifests.set(name, m);
  }
  return m;
}

/** Largest output whose decode overlaps inference (see removeBackground). */
const OVERLAP_MAX_PIXELS = 16_000_000;

function checkAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw signal.reason instanceof CutoutError ? signal.reason : new CutoutError('processing_failed', 'Cancelled');
}

/**
 * Prepares the model's input tensor: the oriented image stretched to the plan's grid (the model's
 * input size, or a smaller side for a quality setting), or letterboxed on it.
 */
async function modelInput(src: Awaited<ReturnType<typeof openImage>>, manifest: ModelManifest, plan: InputPlan): Promise<{ tensor: Float32Array; rgb: Buffer }> {
  const { mean, std } = manifest.input;
  const { width, height, content: c } = plan;
  let rgb: Buffer;
  try {
    let img = orientedRgb(src).resize(c.width, c.height, { fit: 'fill', kernel: 'linear' });
    if (isLetterboxed(plan)) {
      const extend = { top: c.top, left: c.left, bottom: height - c.height - c.top, right: width - c.width - c.left };
      img = img.extend(plan.pad === 'copy' ? { ...extend, extendWith: 'copy' } : { ...extend, background: { r: mean[0], g: mean[1], b: mean[2] } });
    }
    rgb = await img.raw().toBuffer();
  } catch (err) {
    throw decodeError(err, src.format, src.original);
  }
  // The RGB on the model's grid is kept: it guides the matte's refinement there.
  return { tensor: rgbToTensor(rgb, width, height, mean, std), rgb };
}

/**
 * Removes the background of one image. Throws CutoutError with the API's codes:
 * unsupported_format, image_too_large, invalid_request (4 MP rule), no_subject_detected,
 * processing_failed.
 */
export async function removeBackground(input: Buffer, req: RemoveRequest, opts: { signal?: AbortSignal } = {}): Promise<RemoveResult> {
  const started = performance.now();
  const timings: StageTimings = { decode: 0, preprocess: 0, inference: 0, postprocess: 0, encode: 0 };
  const manifest = manifestFor(req.model ?? defaultModel);

  let t = performance.now();
  const src = await openImage(input);
  const resolvedSize = resolveSize(req.size, src.probe.width, src.probe.height);
  if (resolvedSize === 'full' && req.maxFullPixels !== undefined && src.probe.width * src.probe.height > req.maxFullPixels) {
    throw new CutoutError(
      'invalid_request',
      `Image is ${src.probe.width}x${src.probe.height}; size=full on /remove is limited to ${req.maxFullPixels / 1e6} MP. Use size=preview or POST /api/v1/jobs`,
    );
  }
  const out = outputSize(resolvedSize, src.probe.width, src.probe.height);
  checkAborted(opts.signal);
  if (out.width * out.height >= COLLECT_BEFORE_PIXELS) collectGarbage();

  // Up to OVERLAP_MAX_PIXELS the full-size decode runs on libuv's threads while the model runs
  // in its worker. Above it the decode waits for the model: the decoded pixels (150 MB at 50 MP)
  // must not sit beside the model's peak working memory.
  const decode = () => {
    const startedDecode = performance.now();
    return decodeRgb(src, out.width, out.height).then((rgb) => {
      timings.decode = performance.now() - startedDecode;
      return rgb;
    });
  };
  const overlap = out.width * out.height <= OVERLAP_MAX_PIXELS;
  const early = overlap ? decode() : null;
  early?.catch(() => undefined);

  const tp = performance.now();
  const plan = inputPlan(manifest, req.quality, src.probe.width, src.probe.height);
  const { tensor, rgb: modelRgb } = await modelInput(src, manifest, plan);
  timings.preprocess = performance.now() - tp;
  checkAborted(opts.signal);

  const inference = await runModel(manifest, tensor, plan.width, plan.height);
  timings.inference = inference.ms;
  checkAborted(opts.signal);

  const rgb = await (early ?? decode());
  t = performance.now();
  const grid = cropToContent(inference.data, modelRgb, plan);
  const alpha = buildMatte(grid.data, manifest.output.range, grid, grid.rgb, rgb, out.width, out.height, req);
  // Soft-edge colours are estimated for every output that shows colours (a transparent cutout,
  // or one flattened onto a new colour); the matte alone has none.
  if (req.decontaminate !== false && !req.mask) decontaminateEdges(rgb, alpha, out.width, out.height);
  timings.postprocess = performance.now() - t;
  checkAborted(opts.signal);

  t = performance.now();
  const composed = await compose(rgb, alpha, out.width, out.height, req);
  timings.encode = performance.now() - t;

  return {
    data: composed.data,
    format: req.format,
    contentType: CONTENT_TYPES[req.format],
    width: composed.width,
    height: composed.height,
    resolvedSize,
    input: src.probe,
    ms: Math.round(performance.now() - started),
    timings,
  };
}
