/**
 * One picture's matte: the model's input from the oriented image, the model call, the matte at the
 * output's size with its confidence, and `--quality max`'s second pass. A still (process.ts) and
 * each frame of an animation (animation.ts) go through it.
 */
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { checkImageOptions, CONTENT_TYPES } from '../options.js';
import { checkAborted } from './abort.js';
import { decodeError, decodeRgb, fitArea, orientedRgb, outputSize, resolveSize, type SourceImage } from './decode.js';
import { resolveRoi } from './layout.js';
import type { ModelManifest } from '../toolchain/manifest.js';
import { cropRaw, rgbToTensor, type Box } from './matte.js';
import { cleanGridMatte, edgeParamsOf, matteAtSize } from './edges.js';
import type { Precision } from '../options.js';
import { confidenceOf, matteSignals, type MatteSignals } from './confidence.js';
import { cropToContent, inputPlan, isLetterboxed, type InputPlan } from '../toolchain/variants.js';
import { pasteMatte, scaleBox, zoomBox } from './zoom.js';
import type { RemoveRequest, RemoveResult, StageTimings } from './types.js';
import type { Composed } from './compose.js';

/**
 * The largest output whose full-size decode runs on libuv's threads while the model runs, by the
 * weights that run in this process. Above it the decode waits for the model, so that the decoded
 * pixels (150 MB at 50 MP) do not sit beside the session's working memory at its peak. Measured
 * on three 50 MP images in one process (VmHWM): fp32 935 MB without the overlap and 1079 MB with
 * it, where eleven images in a row already came near the 1.5 GB budget, so fp32 keeps the limit;
 * int8 727 and 811 MB, under fp32's figure without it, and a model run elsewhere holds nothing
 * here: both overlap at every size, which takes the decode (about 0.3 s at 50 MP) off the image's
 * time (docs/benchmarks.md, "Large photos at int8").
 */
export function decodeOverlapMaxPixels(weightsHere: 'fp32' | 'int8' | null): number {
  return weightsHere === 'fp32' ? LIMITS.fp32DecodeOverlapMaxPixels : Number.POSITIVE_INFINITY;
}

/** The model call of the pipeline that runs the image (CutoutPipeline.runModel). */
export type RunModel = (
  tensor: Float32Array, width: number, height: number,
  options: { precision?: Precision; sourcePixels?: number; signal?: AbortSignal },
) => Promise<{ data: Float32Array; width: number; height: number; ms: number }>;

/** The pipeline's model as one image sees it: the call, and which weights a call runs in this process (null: elsewhere). */
export interface ImageModel {
  run: RunModel;
  weightsHere(side: number, precision: Precision | undefined): 'fp32' | 'int8' | null;
}

type Source = SourceImage;

/**
 * Prepares the model's input tensor: the oriented image (or a `region` of it) stretched to the
 * plan's grid (the model's input size, or a smaller side for a quality setting), or letterboxed
 * on it. A linear kernel: the same scores on the public set as lanczos3, and 40 % faster when a
 * small photo is enlarged to the grid. Exported for the int8 calibration, which must see the
 * model's input as the pipeline makes it.
 */
export async function modelInput(src: Source, manifest: ModelManifest, plan: InputPlan, region?: Box): Promise<{ tensor: Float32Array; rgb: Buffer }> {
  const { mean, std } = manifest.input;
  const { width, height, content: c } = plan;
  let rgb: Buffer;
  try {
    let img = orientedRgb(src);
    if (region) img = img.extract(region);
    img = img.resize(c.width, c.height, { fit: 'fill', kernel: 'linear' });
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
 * `--quality max`: the model once more on the subject's padded box (zoom.ts), whose matte then
 * replaces the first inside the box. Nothing changes when the box covers most of the image or the
 * second pass finds no subject there.
 */
async function zoomPass(
  runModel: RunModel,
  src: Source,
  manifest: ModelManifest,
  matte: Float32Array,
  grid: { width: number; height: number },
  rgb: Uint8Array,
  alpha: Uint8Array,
  out: { width: number; height: number },
  req: RemoveRequest,
  timings: StageTimings,
  signal?: AbortSignal,
): Promise<void> {
  const box = zoomBox(matte, grid.width, grid.height, out.width, out.height);
  if (!box) return;
  checkAborted(signal);
  let t = performance.now();
  const plan = inputPlan(manifest, 'best', box.width, box.height);
  const region = scaleBox(box, out.width, out.height, src.probe.width, src.probe.height);
  const { tensor, rgb: modelRgb } = await modelInput(src, manifest, plan, region);
  timings.preprocess += performance.now() - t;
  const inference = await runModel(tensor, plan.width, plan.height, { sourcePixels: out.width * out.height, precision: req.precision, signal });
  timings.inference += inference.ms;
  checkAborted(signal);
  t = performance.now();
  let boxMatte: Float32Array;
  try {
    boxMatte = cleanGridMatte(inference.data, manifest.output.range, plan, edgeParamsOf(req.edgeParams));
  } catch (err) {
    if (err instanceof CutoutError && err.code === 'no_subject_detected') return;
    throw err;
  }
  const patch = matteAtSize(boxMatte, plan, modelRgb, cropRaw(rgb, out.width, 3, box), box.width, box.height, req);
  pasteMatte(alpha, out.width, patch, box);
  timings.postprocess += performance.now() - t;
}

/**
 * The output's size (the request's size resolved for this image, within the sync route's limit
 * and a dialect's area cap) and the roi in its pixels. Checked before the model runs: a roi
 * outside the image is the caller's mistake, not worth an inference.
 */
export function planOutput(probe: { width: number; height: number }, req: RemoveRequest) {
  // Options that cannot go together (the doors check them first; this is for every caller).
  checkImageOptions(req, 'api');
  const resolvedSize = resolveSize(req.size, probe.width, probe.height);
  if (resolvedSize === 'full' && req.maxFullPixels !== undefined && probe.width * probe.height > req.maxFullPixels) {
    throw new CutoutError(
      'invalid_request',
      `Image is ${probe.width}x${probe.height}; size=full on /remove is limited to ${req.maxFullPixels / 1e6} MP. Use size=preview or POST /api/v1/jobs`,
    );
  }
  const out = req.maxArea === undefined
    ? outputSize(resolvedSize, probe.width, probe.height)
    : fitArea(resolvedSize === 'full' ? probe : outputSize('full', probe.width, probe.height), req.maxArea);
  const roiBox = req.roi ? resolveRoi(req.roi, probe.width, probe.height, out.width, out.height) : undefined;
  return { resolvedSize, out, roiBox };
}

/** A picture's matte at the output's size, with the colours it was made against and its confidence. */
export interface FrameMatte {
  /** The oriented picture at the output's size, RGB. */
  rgb: Buffer;
  alpha: Uint8Array;
  confidence: number;
  /** The picture's own alpha (keep_alpha=auto), not the model's: no edge colours to estimate. */
  kept?: true;
}

/**
 * The model's matte of one opened picture at `out`'s size. The full-size decode runs on libuv's
 * threads while the model runs in its worker, up to the size where its pixels and the session's
 * working memory together would be too much.
 */
export async function frameMatte(
  manifest: ModelManifest, model: ImageModel, src: SourceImage, out: { width: number; height: number }, req: RemoveRequest, timings: StageTimings,
  opts: { signal?: AbortSignal; afterModel?: () => void; onSignals?: (signals: MatteSignals) => void; rgb?: Buffer },
): Promise<FrameMatte> {
  const plan = inputPlan(manifest, req.quality, src.probe.width, src.probe.height);
  // A caller that decoded the picture at the output's size already (an animation's frame) hands it over.
  const given = opts.rgb;
  const decode = given ? () => Promise.resolve(given) : () => {
    const startedDecode = performance.now();
    return decodeRgb(src, out.width, out.height).then((rgb) => {
      timings.decode += performance.now() - startedDecode;
      return rgb;
    });
  };
  const overlap = out.width * out.height <= decodeOverlapMaxPixels(model.weightsHere(plan.width, req.precision));
  const early = overlap ? decode() : null;
  early?.catch(() => undefined);

  const tp = performance.now();
  const { tensor, rgb: modelRgb } = await modelInput(src, manifest, plan);
  timings.preprocess += performance.now() - tp;
  checkAborted(opts.signal);

  const inference = await model.run(tensor, plan.width, plan.height, { sourcePixels: out.width * out.height, precision: req.precision, signal: opts.signal });
  timings.inference += inference.ms;
  if (req.quality !== 'max') opts.afterModel?.();
  checkAborted(opts.signal);

  const rgb = await (early ?? decode());
  let t = performance.now();
  const grid = cropToContent(inference.data, modelRgb, plan);
  const matte = cleanGridMatte(grid.data, manifest.output.range, grid, edgeParamsOf(req.edgeParams));
  const tc = performance.now();
  const signals = matteSignals(matte, grid.data, grid.rgb, manifest.output.range, grid.width, grid.height);
  const confidence = confidenceOf(signals);
  opts.onSignals?.(signals);
  timings.confidence += performance.now() - tc;
  const alpha = matteAtSize(matte, grid, grid.rgb, rgb, out.width, out.height, req);
  timings.postprocess += performance.now() - t;
  if (req.quality === 'max') {
    await zoomPass(model.run, src, manifest, matte, grid, rgb, alpha, out, req, timings, opts.signal);
    opts.afterModel?.();
  }
  return { rgb, alpha, confidence };
}

/** The pipeline's result from an encoded output; an animation's is made the same way (animation.ts). */
export function resultOf(
  composed: Composed, resolvedSize: 'preview' | 'full', input: RemoveResult['input'],
  judged: { confidence: number; frames: number }, started: number, timings: StageTimings,
): RemoveResult {
  return {
    data: composed.data,
    format: composed.format,
    contentType: composed.format === 'raw' ? 'application/octet-stream' : composed.format === 'zip' ? 'application/zip' : CONTENT_TYPES[composed.format],
    channels: composed.channels,
    width: composed.width,
    height: composed.height,
    resolvedSize,
    foreground: composed.foreground,
    input,
    confidence: judged.confidence,
    frames: judged.frames,
    ms: Math.round(performance.now() - started),
    timings,
  };
}
