/**
 * Matte + pixels -> the encoded result: keep the foreground inside the roi, lay the subject out
 * on its canvas (crop with a margin, scale, position: layout.ts), write the matte alone or put
 * the subject over its background (a colour, translucent or not, or a picture: background.ts),
 * then encode png/webp/jpg, `auto` (PNG when the result has transparency, else JPG) or `zip`
 * (remove.bg's color.jpg + alpha.png), with settings chosen for speed at large sizes (a
 * default-level PNG of 12 MP takes about a second).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type sharpModule from 'sharp';
import type { Sharp } from 'sharp';
import { requireCjs } from '../cjs.js';
import { CutoutError } from '../errors.js';
import type { Margin, Position } from '../layout-options.js';
import { OptionError, type ImageOptions, type Rgb, type ShadowMode } from '../options.js';
import { coverPicture, overBackground, type Layer } from './background.js';
import { blit, keepInside, marginBox, movesSubject, placeSubject } from './layout.js';
import { boundingBox, clearTransparent, cropRaw, flattenOnto, type Box } from './matte.js';
import { blurredBackground, changesCanvas, spaceAlong, outlineRing, placePicture, planPlacement, placesSubject, regionDest, shadowMask, SUBJECT_ALPHA } from './product.js';
import type { OutputFormat, RequestFormat, ResultFormat } from './types.js';
import { storedZip } from './zip.js';
import { jpegWithExif, pngWithExif, type KeptMetadata } from './metadata.js';

const sharp: typeof sharpModule = requireCjs('sharp');

/** Encoder settings: lossless PNG at a fast zlib level; WebP and JPEG at high quality, low effort. */
export const ENCODE = Object.freeze({
  png: { compressionLevel: 1, adaptiveFiltering: false },
  webp: { quality: 90, alphaQuality: 100, effort: 2 },
  jpg: { quality: 90, chromaSubsampling: '4:4:4' },
});

const WHITE: Rgb = { r: 255, g: 255, b: 255 };
const BLACK: Rgb = { r: 0, g: 0, b: 0 };

/** The product-photo options (docs/product-photos.md) compose acts on. */
type ProductOptions = Pick<ImageOptions,
  'canvas' | 'maxWidth' | 'maxHeight' | 'padding' | 'margin' | 'align' | 'scaling' | 'snapCropped' | 'outlineWidth' | 'outlineColor' | 'outlineBlur'
  | 'shadow' | 'addShadow' | 'shadowOpacity' | 'shadowSoftness' | 'shadowDirection' | 'shadowElevation' | 'shadowColor' | 'bgBlur' | 'bgBlurMode' | 'dpi'>;

export interface ComposeOptions extends ProductOptions {
  /** With keep_metadata: the input's EXIF and XMP (metadata.ts). */
  metadata?: KeptMetadata;
  format: RequestFormat;
  bgColor: Rgb | null;
  crop: boolean;
  mask?: boolean;
  /** Margin around a crop (only with `crop`); the canvas may grow past the image. */
  cropMargin?: Margin;
  /** The subject's size on the canvas (0.1 .. 1), undefined: kept. */
  scale?: number;
  /** The subject's place on the canvas; `center` when only `scale` is given. */
  position?: Position;
  /** The only region that may hold foreground, in output pixels (layout.ts `resolveRoi`). */
  roiBox?: Box;
  /** A background picture's encoded bytes (covers the canvas). */
  bgImageData?: Buffer;
}

export interface Composed {
  data: Buffer;
  width: number;
  height: number;
  /** 1 for a mask; 4 for a cutout with alpha, a raw one or a zip; 3 for a flattened encoded one. */
  channels: 1 | 3 | 4;
  /** The encoding written: `auto` resolved to png or jpg. */
  format: ResultFormat;
  /** The subject's box in the result (alpha at the crop threshold); the whole result when there is none. */
  foreground: Box;
}

async function encode(img: Sharp, format: OutputFormat, dpi?: number, metadata?: KeptMetadata): Promise<Buffer> {
  if (format === 'raw') return img.raw().toBuffer();
  if (metadata?.icc && format !== 'gif') return withProfileFile(metadata.icc, (file) => encodeTagged(img, format, dpi, metadata, file));
  return encodeTagged(img, format, dpi, metadata, 'srgb');
}

/**
 * sharp takes an output profile by path only: the input's own is written to a private file for
 * the encode, then removed. The sRGB pixels are converted into it, so it describes them.
 */
async function withProfileFile<T>(icc: Buffer, use: (file: string) => Promise<T>): Promise<T> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-icc-'));
  try {
    const file = path.join(dir, 'input.icc');
    await fs.writeFile(file, icc);
    return await use(file);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

async function encodeTagged(img: Sharp, format: Exclude<OutputFormat, 'raw'>, dpi: number | undefined, metadata: KeptMetadata | undefined, profile: string): Promise<Buffer> {
  // PNG's pHYs and JPEG's JFIF density; WebP has no field for it.
  if (dpi !== undefined && (format === 'png' || format === 'jpg')) img = img.withDensity(dpi);
  if (metadata) {
    img = img.withIccProfile(profile);
    if (metadata.xmp) img = img.withXmp(metadata.xmp);
  }
  if (format === 'webp') return img.webp(ENCODE.webp).toBuffer();
  // GIF keeps 1-bit alpha: a pixel is transparent or not (cgif's threshold, half way).
  if (format === 'gif') return img.gif().toBuffer();
  const data = format === 'png' ? await img.png(ENCODE.png).toBuffer() : await img.jpeg(ENCODE.jpg).toBuffer();
  if (!metadata?.exif) return data;
  return format === 'png' ? pngWithExif(data, metadata.exif) : jpegWithExif(data, metadata.exif);
}

/** Pixels of one size: interleaved RGB and the matte. */
interface Canvas { rgb: Uint8Array; alpha: Uint8Array; width: number; height: number }

/**
 * RGB + matte of a box, resized to `width` x `height` by sharp (which weights colours by alpha).
 * The RGBA is joined here: sharp's own joinChannel runs after its resize, so a joined matte kept
 * the box's size while the colours were resized.
 */
async function resizeSubject(c: Canvas, box: Box, width: number, height: number): Promise<Canvas> {
  const rgb = cropRaw(c.rgb, c.width, 3, box);
  const alpha = cropRaw(c.alpha, c.width, 1, box);
  const m = box.width * box.height;
  const joined = Buffer.allocUnsafe(m * 4);
  for (let i = 0; i < m; i++) {
    joined[i * 4] = rgb[i * 3];
    joined[i * 4 + 1] = rgb[i * 3 + 1];
    joined[i * 4 + 2] = rgb[i * 3 + 2];
    joined[i * 4 + 3] = alpha[i];
  }
  const rgba = await sharp(joined, { raw: { width: box.width, height: box.height, channels: 4 } })
    .resize(width, height, { fit: 'fill' })
    .raw()
    .toBuffer();
  const n = width * height;
  const outRgb = Buffer.allocUnsafe(n * 3);
  const outAlpha = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) {
    outRgb[i * 3] = rgba[i * 4];
    outRgb[i * 3 + 1] = rgba[i * 4 + 1];
    outRgb[i * 3 + 2] = rgba[i * 4 + 2];
    outAlpha[i] = rgba[i * 4 + 3];
  }
  return { rgb: outRgb, alpha: outAlpha, width, height };
}

/** `from` of `c` (it may reach past `c`: transparent there) copied to (`left`, `top`) of a new transparent canvas. */
function onCanvas(c: Canvas, from: Box, width: number, height: number, left: number, top: number): Canvas {
  const rgb = new Uint8Array(width * height * 3);
  const alpha = new Uint8Array(width * height);
  blit(c.rgb, c.width, c.height, 3, from, rgb, width, height, left, top);
  blit(c.alpha, c.width, c.height, 1, from, alpha, width, height, left, top);
  return { rgb, alpha, width, height };
}

/**
 * The canvas the result shows: the whole image; with `crop`, the subject's box (grown by the
 * margin); with `scale`/`position`, the subject moved and resized on that canvas. Without a
 * subject box (nothing above the crop threshold) the image stays as it is.
 */
async function arrange(c: Canvas, opts: ComposeOptions): Promise<Canvas> {
  const moves = movesSubject(opts.scale, opts.position);
  if (!opts.crop && !moves) return c;
  const subject = boundingBox(c.alpha, c.width, c.height);
  if (!subject) return c;
  const canvas: Box = !opts.crop ? { left: 0, top: 0, width: c.width, height: c.height } : opts.cropMargin ? marginBox(subject, opts.cropMargin) : subject;
  if (!moves) {
    const inside = canvas.left >= 0 && canvas.top >= 0 && canvas.left + canvas.width <= c.width && canvas.top + canvas.height <= c.height;
    if (inside) return { rgb: cropRaw(c.rgb, c.width, 3, canvas), alpha: cropRaw(c.alpha, c.width, 1, canvas), width: canvas.width, height: canvas.height };
    return onCanvas(c, canvas, canvas.width, canvas.height, 0, 0);
  }
  const inCanvas: Box = { ...subject, left: subject.left - canvas.left, top: subject.top - canvas.top };
  const dest = placeSubject(inCanvas, canvas.width, canvas.height, opts.scale, opts.position ?? 'center');
  const patch = dest.width === subject.width && dest.height === subject.height
    ? { ...c, box: subject }
    : { ...(await resizeSubject(c, subject, dest.width, dest.height)), box: { left: 0, top: 0, width: dest.width, height: dest.height } };
  return onCanvas(patch, patch.box, canvas.width, canvas.height, dest.left, dest.top);
}

/** Photo pixel (x, y) lands at (x * k + dx, y * k + dy) of the canvas; null: not a plain scale and move. */
interface Transform { k: number; dx: number; dy: number }

/**
 * The product layout (product.ts `planPlacement`): the canvas (WxH, the photo's size, or the
 * subject's box with its padding), bounded by max_*, and the subject scaled and placed on it.
 * The placement reads the subject's box at 50 % alpha; the soft fringe around it (the 5 % box)
 * moves with it.
 */
async function arrangeProduct(c: Canvas, opts: ComposeOptions): Promise<{ c: Canvas; transform: Transform; outline: number }> {
  const subject = boundingBox(c.alpha, c.width, c.height, SUBJECT_ALPHA) ?? boundingBox(c.alpha, c.width, c.height);
  if (!subject) return { c, transform: { k: 1, dx: 0, dy: 0 }, outline: 0 };
  const plan = planPlacement(subject, c.width, c.height, opts);
  if (!changesCanvas(opts)) return { c, transform: { k: 1, dx: 0, dy: 0 }, outline: plan.outline };
  if (!placesSubject(opts)) {
    // max_* alone: the whole picture scaled down.
    const whole = { left: 0, top: 0, width: c.width, height: c.height };
    const scaled = plan.width === c.width && plan.height === c.height ? c : await resizeSubject(c, whole, plan.width, plan.height);
    return { c: scaled, transform: { k: plan.width / c.width, dx: 0, dy: 0 }, outline: plan.outline };
  }
  const fringe = boundingBox(c.alpha, c.width, c.height) ?? subject;
  const to = regionDest(fringe, subject, plan.dest, plan.scale);
  const patch = to.width === fringe.width && to.height === fringe.height
    ? { ...c, box: fringe }
    : { ...(await resizeSubject(c, fringe, to.width, to.height)), box: { left: 0, top: 0, width: to.width, height: to.height } };
  const kx = plan.dest.width / subject.width, ky = plan.dest.height / subject.height;
  return {
    c: onCanvas(patch, patch.box, plan.width, plan.height, to.left, to.top),
    transform: { k: kx, dx: plan.dest.left - subject.left * kx, dy: plan.dest.top - subject.top * ky },
    outline: plan.outline,
  };
}

/** Does the request ask for any of the product layout's options? */
function productLayout(opts: ComposeOptions): boolean {
  return changesCanvas(opts);
}

/** The shadow asked for: `shadow`, else remove.bg's `add_shadow=true` as `float` (a job stored before `shadow` took a mode may hold `true`). */
export function shadowModeOf(opts: Pick<ComposeOptions, 'shadow' | 'addShadow'>): ShadowMode {
  const s = opts.shadow as unknown;
  if (s === true) return 'float';
  if (s === false) return 'none';
  if (typeof s === 'string') return s as ShadowMode;
  return opts.addShadow ? 'float' : 'none';
}

/** `layer` (RGB and a 0..1 alpha, in `color`) under the subject of `c`: Porter-Duff over. */
function under(c: Canvas, mask: Float32Array, color: Rgb): Canvas {
  const n = c.width * c.height;
  const rgba = new Uint8Array(n * 4);
  const a = color.a ?? 255;
  for (let i = 0, j = 0; i < n; i++, j += 4) {
    rgba[j] = color.r; rgba[j + 1] = color.g; rgba[j + 2] = color.b;
    rgba[j + 3] = Math.round(mask[i] * a);
  }
  const layer = overBackground(c.rgb, c.alpha, rgba);
  return { rgb: layer.rgb, alpha: layer.alpha ?? new Uint8Array(n).fill(255), width: c.width, height: c.height };
}

/** The outline ring (product.ts) under the subject, computed on the subject's neighbourhood only. */
function withOutline(c: Canvas, width: number, blur: number, color: Rgb): Canvas {
  const box = boundingBox(c.alpha, c.width, c.height, SUBJECT_ALPHA);
  if (!box || (width <= 0 && blur <= 0)) return c;
  const grow = Math.ceil(width + 3 * blur + 2);
  const left = Math.max(0, box.left - grow), top = Math.max(0, box.top - grow);
  const region = { left, top, width: Math.min(c.width, box.left + box.width + grow) - left, height: Math.min(c.height, box.top + box.height + grow) - top };
  const ring = outlineRing(cropRaw(c.alpha, c.width, 1, region), region.width, region.height, width, blur);
  const mask = new Float32Array(c.width * c.height);
  for (let y = 0; y < region.height; y++) mask.set(ring.subarray(y * region.width, (y + 1) * region.width), (region.top + y) * c.width + region.left);
  return under(c, mask, color);
}

/** True when some pixel is less than opaque. */
function hasTransparency(alpha: Uint8Array): boolean {
  for (let i = 0; i < alpha.length; i++) if (alpha[i] !== 255) return true;
  return false;
}

/** The subject over its background: a picture, a translucent colour, an opaque one, or none. */
async function withBackground(c: Canvas, opts: ComposeOptions, format: RequestFormat, photo?: Canvas, transform?: Transform | null): Promise<Layer> {
  if (opts.bgBlur !== undefined && photo) {
    if (opts.bgColor || opts.bgImageData) throw new OptionError('bg_blur', 'bg_blur keeps the photo\'s own background; it cannot be combined with bg_color or a background picture', 'multiple_bg_sources');
    const radius = opts.bgBlur * Math.max(photo.width, photo.height);
    const blurred = blurredBackground(photo.rgb, photo.alpha, photo.width, photo.height, radius, opts.bgBlurMode === 'bokeh');
    const t = transform ?? { k: 0, dx: 1, dy: 1 }; // no plain transform: the picture covers the canvas
    const bg = placePicture(blurred, photo.width, photo.height, c.width, c.height, t.k, t.dx, t.dy);
    const out = Buffer.allocUnsafe(c.width * c.height * 3);
    for (let i = 0, j = 0; i < c.alpha.length; i++, j += 3) {
      const a = c.alpha[i], ia = 255 - a;
      out[j] = (c.rgb[j] * a + bg[j] * ia + 127) / 255;
      out[j + 1] = (c.rgb[j + 1] * a + bg[j + 1] * ia + 127) / 255;
      out[j + 2] = (c.rgb[j + 2] * a + bg[j + 2] * ia + 127) / 255;
    }
    return { rgb: out, alpha: null };
  }
  if (opts.bgImageData) {
    if (opts.bgColor) throw new OptionError('bg_image', 'Give either a background colour or a background image, not both', 'multiple_bg_sources');
    return overBackground(c.rgb, c.alpha, await coverPicture(opts.bgImageData, c.width, c.height));
  }
  const color = opts.bgColor ?? (format === 'jpg' ? WHITE : null);
  if (color && color.a !== undefined && color.a < 255) return overBackground(c.rgb, c.alpha, color);
  if (color) return { rgb: flattenOnto(c.rgb, c.alpha, color), alpha: null };
  // The colour under fully transparent pixels is invisible: cleared, it costs PNG's deflate little.
  // A zip keeps it: its color.jpg is read without the matte by some, and JPEG rings at hard edges.
  if (format !== 'zip') clearTransparent(c.rgb, c.alpha);
  return { rgb: Buffer.from(c.rgb.buffer, c.rgb.byteOffset, c.rgb.byteLength), alpha: c.alpha };
}

/**
 * Builds the output image. `rgb` is interleaved 8-bit RGB and `alpha` the matte, both width x height;
 * both may be changed in place. JPEG has no alpha: without a background it is flattened onto
 * white (as remove.bg does). Throws no_subject_detected when the roi holds no foreground.
 */
export async function compose(rgb: Uint8Array, alpha: Uint8Array, width: number, height: number, opts: ComposeOptions): Promise<Composed> {
  if (opts.mask && opts.format === 'zip') throw new OptionError('format', 'format zip already carries the matte (alpha.png); it cannot be combined with the matte alone (mask, channels=alpha)', 'invalid_format');
  if (opts.roiBox && !keepInside(alpha, width, height, opts.roiBox)) throw new CutoutError('no_subject_detected', 'No foreground subject was found inside the roi');
  const photo: Canvas = { rgb, alpha, width, height };
  // The photo's own pixels for bg_blur, before a clear of transparent colours can touch them.
  const photoForBlur = opts.bgBlur !== undefined && !opts.mask ? { ...photo, rgb: Uint8Array.from(rgb), alpha: Uint8Array.from(alpha) } : undefined;
  let c: Canvas;
  let transform: Transform | null = null;
  let outline = 0;
  if (productLayout(opts)) {
    ({ c, transform, outline } = await arrangeProduct(photo, opts));
  } else {
    c = await arrange(photo, opts);
    if (!opts.crop && !movesSubject(opts.scale, opts.position)) transform = { k: 1, dx: 0, dy: 0 };
    outline = opts.outlineWidth ? spaceAlong(opts.outlineWidth, Math.max(c.width, c.height)) : 0;
  }
  if (opts.outlineWidth !== undefined || opts.outlineBlur !== undefined) {
    const long = Math.max(c.width, c.height);
    c = withOutline(c, outline, (opts.outlineBlur ?? 0) * long, opts.outlineColor ?? WHITE);
  }
  const foreground = boundingBox(c.alpha, c.width, c.height) ?? { left: 0, top: 0, width: c.width, height: c.height };
  const shadow = shadowModeOf(opts);
  if (shadow !== 'none' && !opts.mask) {
    const mask = shadowMask(c.alpha, c.width, c.height, {
      kind: shadow, opacity: opts.shadowOpacity ?? 0.5, softness: opts.shadowSoftness ?? 0.5,
      direction: opts.shadowDirection ?? 0, elevation: opts.shadowElevation ?? 45,
    });
    if (mask) c = under(c, mask, opts.shadowColor ?? BLACK);
  }
  const raw1 = { raw: { width: c.width, height: c.height, channels: 1 as const } };
  const raw3 = { raw: { width: c.width, height: c.height, channels: 3 as const } };
  if (opts.mask) {
    // The matte is data: `auto` writes it losslessly, as PNG.
    const format = opts.format === 'auto' ? 'png' : (opts.format as OutputFormat);
    const a = c.alpha;
    const data = format === 'raw' ? Buffer.from(a.buffer, a.byteOffset, a.byteLength) : await encode(sharp(a, raw1).toColourspace('b-w'), format, opts.dpi);
    return { data, width: c.width, height: c.height, channels: 1, format, foreground };
  }
  let layer = await withBackground(c, opts, opts.format, photoForBlur, transform);
  const transparent = layer.alpha !== null && hasTransparency(layer.alpha);
  const format: ResultFormat = opts.format === 'auto' ? (transparent ? 'png' : 'jpg') : opts.format;
  if (format === 'zip') {
    const colour = await encode(sharp(layer.rgb, raw3), 'jpg');
    const matte = layer.alpha ?? new Uint8Array(c.width * c.height).fill(255);
    const alphaPng = await encode(sharp(matte, raw1).toColourspace('b-w'), 'png');
    const data = storedZip([{ name: 'color.jpg', data: colour }, { name: 'alpha.png', data: alphaPng }]);
    return { data, width: c.width, height: c.height, channels: 4, format, foreground };
  }
  if (format === 'jpg' && layer.alpha) layer = { rgb: flattenOnto(layer.rgb, layer.alpha, WHITE), alpha: null };
  let img = layer.alpha
    ? sharp(layer.rgb, raw3).joinChannel(Buffer.from(layer.alpha.buffer, layer.alpha.byteOffset, layer.alpha.byteLength), raw1)
    : sharp(layer.rgb, raw3);
  // Raw is always RGBA, so that a caller's chain sees one layout whatever the background.
  if (!layer.alpha && format === 'raw') img = img.ensureAlpha(1);
  const data = await encode(img, format, opts.dpi, opts.metadata);
  return { data, width: c.width, height: c.height, channels: layer.alpha || format === 'raw' ? 4 : 3, format, foreground };
}
