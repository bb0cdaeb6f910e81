/**
 * An animated GIF, WebP or PNG (APNG) cut out frame by frame (`animation: keep`, the default):
 * every frame through the one still pipeline (frame.ts's matte, compose), the mattes of
 * successive frames held where the picture did not change, and the frames written back as an
 * animation with the input's count, timing and loop.
 *
 * Why the hold (docs/cli.md, "Animations"): the model sees each frame alone, and two frames that
 * differ by a few pixels elsewhere give a still subject's edge mattes that differ by a few levels,
 * which shows as a shimmer. Where a pixel (or any pixel near it) did not change since the frame
 * before, its alpha is the frame before's; where it changed, the new frame's. A frame identical to
 * the one before is not run at all.
 */
import type sharpModule from 'sharp';
import { requireCjs } from '../cjs.js';
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { OptionError } from '../option-error.js';
import type { Format } from '../options.js';
import type { ModelManifest } from '../toolchain/manifest.js';
import { checkAborted } from './abort.js';
import { compose, ENCODE } from './compose.js';
import { decodeError, decodeRgb, openRawPixels, type SourceImage } from './decode.js';
import { decontaminateEdges, edgeParamsOf } from './edges.js';
import { frameMatte, planOutput, resultOf, type FrameMatte, type ImageModel } from './frame.js';
import { keptAlpha } from './kept-alpha.js';
import type { Box } from './matte.js';
import type { RemoveRequest, RemoveResult, StageTimings } from './types.js';

const sharp: typeof sharpModule = requireCjs('sharp');

/** An animation's frames, each composed whole (disposal and blending applied), RGBA. */
export interface Frames {
  width: number;
  height: number;
  rgba: Buffer[];
  /** Milliseconds each frame shows. */
  delays: number[];
  /** Times it plays; 0: forever. */
  loop: number;
}

/** GIF's and WebP's frame time when a file gives none, as browsers show it. */
const DEFAULT_DELAY_MS = 100;

/** The frame count and the pixel budget, from the header: before any frame is decoded. */
export function checkAnimationSize(src: SourceImage, req: Pick<RemoveRequest, 'maxAnimationPixels'>): void {
  const { width, height } = src.probe;
  const frames = src.frames;
  const pixels = frames * width * height;
  const what = `Animation has ${frames} frames of ${width}x${height} (${Number((pixels / 1e6).toFixed(1))} MP in all)`;
  if (frames > LIMITS.maxAnimationFrames || pixels > LIMITS.maxAnimationPixels) {
    throw new CutoutError('image_too_large', `${what}; the limits are ${LIMITS.maxAnimationFrames} frames and ${LIMITS.maxAnimationPixels / 1e6} MP in all. Cut it shorter or smaller, or use animation=first for its first frame`, { reason: 'animation_too_large' });
  }
  if (req.maxAnimationPixels !== undefined && pixels > req.maxAnimationPixels) {
    throw new CutoutError('image_too_large', `${what}; POST /api/v1/remove answers animations up to ${req.maxAnimationPixels / 1e6} MP in all (counted on the input, whatever the size asked). Use POST /api/v1/jobs`, { reason: 'animation_too_large' });
  }
}

/** Every frame of a GIF or WebP (libvips composes them) or an APNG (upng-js does). */
export async function readFrames(src: SourceImage): Promise<Frames> {
  if (src.format === 'png') {
    const UPNG: typeof import('upng-js') = requireCjs('upng-js');
    let decoded;
    let rgba: ArrayBuffer[];
    try {
      decoded = UPNG.decode(src.original);
      rgba = UPNG.toRGBA8(decoded);
    } catch (err) {
      throw new CutoutError('unsupported_format', 'Corrupt or undecodable APNG file', { cause: err });
    }
    const loop = decoded.tabs.acTL?.num_plays ?? 0;
    return { width: decoded.width, height: decoded.height, rgba: rgba.map((b) => Buffer.from(b)), delays: decoded.frames.map((f) => Math.round(f.delay) || DEFAULT_DELAY_MS), loop };
  }
  try {
    const img = sharp(src.original, { pages: -1, failOn: 'warning', limitInputPixels: false });
    const meta = await img.metadata();
    const { data, info } = await img.ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    const height = info.pageHeight ?? meta.pageHeight ?? info.height;
    const count = Math.floor(info.height / height);
    const size = info.width * height * 4;
    const rgba = Array.from({ length: count }, (_, i) => data.subarray(i * size, (i + 1) * size));
    const delays = Array.from({ length: count }, (_, i) => meta.delay?.[i] || DEFAULT_DELAY_MS);
    return { width: info.width, height, rgba, delays, loop: meta.loop ?? 0 };
  } catch (err) {
    throw decodeError(err, src.format, src.original);
  }
}

/**
 * Where the picture changed since the frame before, widened by `reach` pixels and softened: 1
 * where it moved (take the new matte), 0 where nothing near it changed (hold the old one). A
 * change is a channel differing by more than `threshold` levels, above a GIF's dithering noise.
 */
export function changeWeights(prev: Uint8Array, next: Uint8Array, width: number, height: number, reach: number, threshold = 24): Float32Array {
  const n = width * height;
  const changed = new Uint8Array(n);
  let any = false;
  for (let i = 0, j = 0; i < n; i++, j += 3) {
    if (Math.abs(prev[j] - next[j]) > threshold || Math.abs(prev[j + 1] - next[j + 1]) > threshold || Math.abs(prev[j + 2] - next[j + 2]) > threshold) {
      changed[i] = 1;
      any = true;
    }
  }
  const weights = new Float32Array(n);
  if (!any) return weights;
  // A box of side 2*reach+1 around each changed pixel (two running sums: rows, then columns).
  const rows = new Uint16Array(n);
  for (let y = 0; y < height; y++) {
    let sum = 0;
    const row = y * width;
    for (let x = -reach; x < width; x++) {
      if (x + reach < width) sum += changed[row + x + reach];
      if (x - reach - 1 >= 0) sum -= changed[row + x - reach - 1];
      if (x >= 0) rows[row + x] = sum;
    }
  }
  for (let x = 0; x < width; x++) {
    let sum = 0;
    for (let y = -reach; y < height; y++) {
      if (y + reach < height) sum += rows[(y + reach) * width + x];
      if (y - reach - 1 >= 0) sum -= rows[(y - reach - 1) * width + x];
      if (y >= 0) weights[y * width + x] = sum > 0 ? 1 : 0;
    }
  }
  return weights;
}

/** `alpha` held to `held` where `weights` is 0, blended where it is between (in place). */
export function holdStill(alpha: Uint8Array, held: Uint8Array, weights: Float32Array): void {
  for (let i = 0; i < alpha.length; i++) {
    const w = weights[i];
    if (w < 1) alpha[i] = Math.round(w * alpha[i] + (1 - w) * held[i]);
  }
}

/** The encoding of an animation: what was asked, animated WebP when nothing was, never a still-only one. */
function animatedFormat(req: RemoveRequest): Format {
  if (req.formatByDefault || req.format === 'auto') return 'webp';
  if (req.format === 'png' || req.format === 'webp' || req.format === 'gif') return req.format;
  throw new OptionError('format', `format ${req.format} cannot hold an animation: use webp (default), gif or png (APNG), or animation=first for the first frame as a still`, 'invalid_format');
}

/** The frames, composed, written as one animation. */
async function encodeFrames(frames: Buffer[], width: number, height: number, format: Format, source: Frames): Promise<Buffer> {
  if (format === 'png') {
    const UPNG: typeof import('upng-js') = requireCjs('upng-js');
    return Buffer.from(UPNG.encode(frames.map((f) => f.buffer.slice(f.byteOffset, f.byteOffset + f.byteLength) as ArrayBuffer), width, height, 0, source.delays));
  }
  const timing = { delay: source.delays, loop: source.loop };
  if (format === 'gif') return tall(frames, width, height).gif({ ...timing, keepDuplicateFrames: true }).toBuffer();
  return tall(keptApart(frames), width, height).webp({ ...ENCODE.webp, ...timing }).toBuffer();
}

function tall(frames: Buffer[], width: number, height: number) {
  return sharp(Buffer.concat(frames), { raw: { width, height: height * frames.length, channels: 4, pageHeight: height } });
}

/**
 * libwebp's animation encoder folds a frame into the one before when they are alike (one frame,
 * the two durations summed; lossy WebP counts near-equal as alike), which plays the same but
 * breaks "the same frame count" that callers count on: a still subject's frames are alike once
 * its background is gone. So every other frame gets one invisible change, a transparent pixel's
 * alpha 0 -> 1 (an opaque one's 255 -> 254), which the encoder sees. GIF's writer has its own
 * switch (keepDuplicateFrames).
 */
function keptApart(frames: Buffer[]): Buffer[] {
  return frames.map((frame, i) => {
    if (i % 2 === 0) return frame;
    const nudged = Buffer.from(frame);
    let at = 3;
    while (at < nudged.length && nudged[at] !== 0) at += 4;
    if (at < nudged.length) nudged[at] = 1;
    else nudged[3] = nudged[3] === 255 ? 254 : nudged[3] + 1;
    return nudged;
  });
}

/** Widens a matte's one channel (the matte alone, `mask`) to opaque grey RGBA, for the animated encoders. */
function greyToRgba(grey: Buffer): Buffer {
  const out = Buffer.allocUnsafe(grey.length * 4);
  for (let i = 0; i < grey.length; i++) {
    out[i * 4] = out[i * 4 + 1] = out[i * 4 + 2] = grey[i];
    out[i * 4 + 3] = 255;
  }
  return out;
}

/** The union of the frames' subject boxes: an animation's `foreground`. */
function unionBox(boxes: Box[]): Box {
  const left = Math.min(...boxes.map((b) => b.left));
  const top = Math.min(...boxes.map((b) => b.top));
  const right = Math.max(...boxes.map((b) => b.left + b.width));
  const bottom = Math.max(...boxes.map((b) => b.top + b.height));
  return { left, top, width: right - left, height: bottom - top };
}

/**
 * Each frame's matte in order, held where the picture did not change (module comment). Frames go
 * through the model one after another: the model's session runs one picture at a time, and a batch
 * of frames ran no faster on the CPU (docs/benchmarks.md, "Animations").
 */
async function frameMattes(
  manifest: ModelManifest, model: ImageModel, frames: Frames, out: { width: number; height: number }, req: RemoveRequest, timings: StageTimings, signal?: AbortSignal,
): Promise<FrameMatte[]> {
  const mattes: FrameMatte[] = [];
  // Near enough to cover an edge's soft band as it moves: 1 % of the long side, at least 2 px.
  const reach = Math.max(2, Math.round(0.01 * Math.max(out.width, out.height)));
  let before: FrameMatte | null = null;
  for (const rgba of frames.rgba) {
    checkAborted(signal);
    const src = openRawPixels({ data: rgba, width: frames.width, height: frames.height, channels: 4 });
    const frame = { ...src, hasAlpha: translucent(rgba) };
    let matte: FrameMatte;
    // Decoded once: to compare with the frame before, and as the model's colours at the output's size.
    const t = performance.now();
    const rgb = await decodeRgb(frame, out.width, out.height);
    timings.decode += performance.now() - t;
    if (before && rgb.equals(before.rgb)) {
      matte = { ...before, alpha: before.alpha.slice() };
    } else if (req.keepAlpha === 'auto' && frame.hasAlpha) {
      // keep_alpha=auto: a frame with transparency (a sticker's) keeps its own alpha, as a still does.
      const kept = await keptAlpha(frame, out.width, out.height);
      matte = kept ? { ...kept, confidence: 1, kept: true } : await frameMatte(manifest, model, frame, out, req, timings, { signal, rgb });
    } else {
      matte = await frameMatte(manifest, model, frame, out, req, timings, { signal, rgb });
      if (before) {
        const held = performance.now();
        holdStill(matte.alpha, before.alpha, changeWeights(before.rgb, matte.rgb, out.width, out.height, reach));
        timings.postprocess += performance.now() - held;
      }
    }
    mattes.push(matte);
    before = matte;
  }
  return mattes;
}

/** Whether any pixel of RGBA is not opaque (a GIF's transparent colour): the model then sees it on white, as a still. */
function translucent(rgba: Buffer): boolean {
  for (let i = 3; i < rgba.length; i += 4) if (rgba[i] !== 255) return true;
  return false;
}

/** Cuts out every frame of an opened animation (removeOne hands it over after the header read). */
export async function removeAnimation(
  manifest: ModelManifest, model: ImageModel, src: SourceImage, req: RemoveRequest,
  opts: { signal?: AbortSignal; afterModel?: () => void; started: number; timings: StageTimings },
): Promise<RemoveResult> {
  const { timings, signal } = opts;
  const format = animatedFormat(req);
  if (req.format === 'zip') throw new OptionError('format', 'format zip holds one picture; an animation cannot go into it', 'invalid_format');
  checkAnimationSize(src, req);
  const { resolvedSize, out, roiBox } = planOutput(src.probe, req);
  let t = performance.now();
  const frames = await readFrames(src);
  timings.decode += performance.now() - t;
  const mattes = await frameMattes(manifest, model, frames, out, req, timings, signal);
  opts.afterModel?.();
  const composedFrames: Buffer[] = [];
  const boxes: Box[] = [];
  let size = out;
  for (const { rgb, alpha, kept } of mattes) {
    checkAborted(signal);
    t = performance.now();
    // Each frame's own copy: a held frame shares its colours with the one before.
    const colours = Buffer.from(rgb);
    // A frame's own alpha (keep_alpha) has no soft edge to estimate colours at.
    if (!kept && req.decontaminate !== false && !req.mask) decontaminateEdges(colours, alpha, out.width, out.height, edgeParamsOf(req.edgeParams));
    timings.postprocess += performance.now() - t;
    t = performance.now();
    const composed = await compose(colours, alpha, out.width, out.height, { ...req, format: 'raw', roiBox });
    if (composedFrames.length && (composed.width !== size.width || composed.height !== size.height)) {
      throw new OptionError(req.crop ? 'crop' : 'canvas', 'crop and a subject-sized canvas size each frame by its own subject, and an animation\'s frames must share one size: use a fixed canvas (WxH) or original, or animation=first');
    }
    size = { width: composed.width, height: composed.height };
    composedFrames.push(composed.channels === 1 ? greyToRgba(composed.data) : composed.data);
    boxes.push(composed.foreground);
    timings.encode += performance.now() - t;
  }
  t = performance.now();
  const data = await encodeFrames(composedFrames, size.width, size.height, format, frames);
  timings.encode += performance.now() - t;
  const confidence = Math.min(...mattes.map((m) => m.confidence));
  const composed = { data, format, channels: 4 as const, width: size.width, height: size.height, foreground: unionBox(boxes) };
  return resultOf(composed, resolvedSize, src.probe, { confidence, frames: mattes.length }, opts.started, timings);
}
