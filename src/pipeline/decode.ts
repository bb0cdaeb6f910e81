/**
 * Bytes to pixels, safely: a whitelist of formats by magic bytes, the 25 MB / 50 MP limits checked
 * from the header before any pixel is decoded, EXIF orientation, and the preview/full/auto size.
 * sharp cannot read BMP, so BMP is decoded by bmp-ts into raw pixels first; nor HEVC (its build
 * carries libheif with AV1 only), so HEIC is decoded by heic-decode (libheif in WebAssembly).
 * The colours of every input arrive as sRGB: sharp applies an embedded ICC profile (CMYK, Display
 * P3, Adobe RGB) on the way to 8-bit RGB, and widens greyscale (docs/cli.md, "Inputs").
 */
import type sharpModule from 'sharp';
import type { Metadata, Sharp, SharpOptions } from 'sharp';
import { requireCjs } from '../cjs.js';
import { CutoutError } from '../errors.js';
import { inputTooLargeMessage, LIMITS, shownAbove } from '../limits.js';
import type { Size } from '../options.js';
import type { ImageProbe, InputFormat, RawPixels } from './types.js';

const sharp: typeof sharpModule = requireCjs('sharp');

// Long-running servers must not keep decoded images in sharp's operation cache.
sharp.cache(false);

/** Brands of an ISO-BMFF `ftyp` box that mean AVIF, and those that mean HEIC/HEIF. */
const AVIF_BRANDS: ReadonlySet<string> = new Set(['avif', 'avis']);
const HEIF_BRANDS: ReadonlySet<string> = new Set(['heic', 'heix', 'heim', 'heis', 'hevc', 'hevx', 'mif1', 'msf1']);

/**
 * AVIF or HEIC from an ISO-BMFF file's `ftyp` box (its major and compatible brands), or null.
 * AVIF wins when both are named (an AVIF lists `mif1` too); a `mif1` file whose coding is AV1 is
 * told by sharp's header read, which names the compression (openImage).
 */
function sniffHeif(b: Uint8Array): 'avif' | 'heic' | null {
  if (b.length < 16 || b[4] !== 0x66 || b[5] !== 0x74 || b[6] !== 0x79 || b[7] !== 0x70) return null;
  const size = Math.min(b.length, ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0);
  const brands: string[] = [];
  for (let at = 8; at + 4 <= size; at += at === 8 ? 8 : 4) brands.push(String.fromCharCode(b[at], b[at + 1], b[at + 2], b[at + 3]));
  if (brands.some((brand) => AVIF_BRANDS.has(brand))) return 'avif';
  return brands.some((brand) => HEIF_BRANDS.has(brand)) ? 'heic' : null;
}

/** The format by magic bytes, or null when it is not one we accept (SVG, PDF, JPEG XL, text...). */
export function sniffFormat(b: Uint8Array): InputFormat | null {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47 && b[4] === 0x0d && b[5] === 0x0a && b[6] === 0x1a && b[7] === 0x0a) return 'png';
  if (b.length >= 6 && b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x38 && (b[4] === 0x37 || b[4] === 0x39) && b[5] === 0x61) return 'gif';
  if (b.length >= 12 && b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46 && b[8] === 0x57 && b[9] === 0x45 && b[10] === 0x42 && b[11] === 0x50) return 'webp';
  if (b.length >= 26 && b[0] === 0x42 && b[1] === 0x4d) return 'bmp';
  if (b.length >= 4 && ((b[0] === 0x49 && b[1] === 0x49 && b[2] === 0x2a && b[3] === 0x00) || (b[0] === 0x4d && b[1] === 0x4d && b[2] === 0x00 && b[3] === 0x2a))) return 'tiff';
  return sniffHeif(b);
}

/** The frame count of an APNG (its `acTL` chunk, which must come before the first IDAT), or 1. */
export function apngFrames(b: Uint8Array): number {
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (let at = 8; at + 12 <= b.length;) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(b[at + 4], b[at + 5], b[at + 6], b[at + 7]);
    if (type === 'IDAT' || type === 'IEND') return 1;
    if (type === 'acTL' && at + 12 <= b.length) return Math.max(1, view.getUint32(at + 8));
    at += 12 + length;
  }
  return 1;
}

/** Width and height from a BMP header (BITMAPCOREHEADER or BITMAPINFOHEADER and later). */
export function readBmpSize(b: Uint8Array): { width: number; height: number } {
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const headerSize = view.getUint32(14, true);
  if (headerSize === 12) return { width: view.getUint16(18, true), height: view.getUint16(20, true) };
  if (b.length < 26 || headerSize < 40) throw new CutoutError('unsupported_format', 'Corrupt BMP header');
  return { width: Math.abs(view.getInt32(18, true)), height: Math.abs(view.getInt32(22, true)) };
}

function tooLarge(what: string): CutoutError {
  return new CutoutError('image_too_large', what, { reason: 'resolution_too_high' });
}

function checkArea(width: number, height: number): void {
  if (width * height > LIMITS.maxInputPixels) {
    throw tooLarge(`Image is ${width}x${height} (${shownAbove(width * height, LIMITS.maxInputPixels, 1e6)} MP); the limit is ${LIMITS.maxInputPixels / 1e6} megapixels`);
  }
}

const SHARP_OPTIONS: SharpOptions = {
  // Our own check runs first; this is the second lock on the same door.
  limitInputPixels: LIMITS.maxInputPixels,
  // A truncated or corrupt file is an error, not a half-grey picture.
  failOn: 'warning',
};

/**
 * True when the file lacks the end marker its format requires (JPEG EOI, PNG IEND, GIF trailer):
 * the reliable sign of a cut-off download, whatever libvips happened to say.
 */
export function missingEndMarker(b: Uint8Array, format: InputFormat | null): boolean {
  const n = b.length;
  if (format === 'jpeg') {
    // Some writers pad after EOI: look for FF D9 in the last few bytes.
    for (let i = n - 2; i >= Math.max(0, n - 32); i--) if (b[i] === 0xff && b[i + 1] === 0xd9) return false;
    return true;
  }
  if (format === 'png') return n < 12 || !(b[n - 8] === 0x49 && b[n - 7] === 0x45 && b[n - 6] === 0x4e && b[n - 5] === 0x44);
  if (format === 'gif') return b[n - 1] !== 0x3b;
  return false;
}

const JPEG_EOI = Buffer.from([0xff, 0xd9]);

/**
 * A JPEG that lacks only its 2-byte end marker (FF D9), as some cameras, scanners and cut-short
 * writers leave it, is shown whole by browsers and most tools: the marker is given back, so
 * libjpeg reads every scan and warns of nothing. A JPEG cut anywhere else still ends inside its
 * scan data, which libjpeg reports as a premature end of a data segment even with the marker
 * given back, and `failOn: 'warning'` refuses it ("Truncated JPEG file", decodeError). libvips'
 * `failOn` levels cannot tell the two apart: a missing marker alone is the same "premature end of
 * JPEG image" warning as a file cut in half, at every level that refuses anything.
 */
export function withJpegEnd(b: Buffer): Buffer {
  return missingEndMarker(b, 'jpeg') ? Buffer.concat([b, JPEG_EOI]) : b;
}

/** Maps sharp/libvips failures to our codes, with a short reason rather than libvips' text. */
export function decodeError(err: unknown, format: InputFormat | null, bytes?: Uint8Array): CutoutError {
  if (err instanceof CutoutError) return err;
  const msg = String((err as Error)?.message ?? err);
  if (/pixel limit/i.test(msg)) return tooLarge(`Image is over ${LIMITS.maxInputPixels / 1e6} megapixels`);
  const what = format ? format.toUpperCase() : 'image';
  if ((bytes && missingEndMarker(bytes, format)) || /premature end|truncated|unexpected end|not enough data|short read|EOF/i.test(msg)) {
    return new CutoutError('unsupported_format', `Truncated ${what} file`);
  }
  return new CutoutError('unsupported_format', `Corrupt or undecodable ${what} file`, { cause: err });
}

export interface SourceImage {
  format: InputFormat;
  /** Frames of an animation (GIF, WebP, APNG), from its header; 1 for a still. */
  frames: number;
  /** The bytes as given (for error diagnosis). */
  original: Buffer;
  /** What to hand to sharp: the original bytes, or raw RGBA for BMP. */
  sharpInput: Buffer;
  sharpOptions: SharpOptions;
  probe: ImageProbe;
  hasAlpha: boolean;
}

/**
 * Pixels a caller already holds (the library's raw input): 8-bit, interleaved, 3 or 4 channels.
 * The same pixel limit as a file's; nothing to decode.
 */
export function openRawPixels(raw: RawPixels): SourceImage {
  const { width, height, channels } = raw;
  const data = raw.data as unknown;
  if (!(data instanceof Uint8Array || data instanceof Uint8ClampedArray)) throw new CutoutError('invalid_request', 'Raw input: data must be a Buffer, Uint8Array or Uint8ClampedArray of 8-bit pixels');
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1) throw new CutoutError('invalid_request', `Raw input: width and height must be positive integers (got ${width}x${height})`);
  if (channels !== 3 && channels !== 4) throw new CutoutError('invalid_request', `Raw input: channels must be 3 (RGB) or 4 (RGBA), got ${String(channels)}`);
  checkArea(width, height);
  if (raw.data.length !== width * height * channels) {
    throw new CutoutError('invalid_request', `Raw input: ${width}x${height}x${channels} needs ${width * height * channels} bytes, got ${raw.data.length}`);
  }
  const bytes = Buffer.from(raw.data.buffer, raw.data.byteOffset, raw.data.byteLength);
  return {
    format: 'raw',
    original: bytes,
    sharpInput: bytes,
    sharpOptions: { raw: { width, height, channels } },
    probe: { format: 'raw', width, height, frames: 1 },
    frames: 1,
    hasAlpha: channels === 4,
  };
}

/**
 * Checks format and limits from the header only. Throws unsupported_format or image_too_large.
 */
export async function openImage(bytes: Buffer): Promise<SourceImage> {
  if (bytes.length === 0) throw new CutoutError('unsupported_format', 'Empty file');
  if (bytes.length > LIMITS.maxInputBytes) throw tooLarge(inputTooLargeMessage(bytes.length));
  const format = sniffFormat(bytes);
  if (!format) throw new CutoutError('unsupported_format', 'Not a JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC image', { reason: 'not_an_image' });
  if (format === 'bmp') return openBmp(bytes);
  let meta: Metadata;
  try {
    // Header only: our own check below gives the size in its message.
    meta = await sharp(bytes, { ...SHARP_OPTIONS, limitInputPixels: false }).metadata();
  } catch (err) {
    throw decodeError(err, format, bytes);
  }
  if (!meta.width || !meta.height) throw new CutoutError('unsupported_format', `Corrupt ${format.toUpperCase()} header`);
  checkArea(meta.width, meta.height);
  // A HEIF file's coding decides who decodes it: sharp for AV1, heic-decode for HEVC.
  const heif = meta.format === 'heif' ? (meta.compression === 'av1' ? 'avif' : 'heic') : null;
  if (heif === 'heic') return openHeic(bytes);
  const found = heif ?? format;
  const frames = found === 'png' ? apngFrames(bytes) : found === 'gif' || found === 'webp' ? Math.max(1, meta.pages ?? 1) : 1;
  // EXIF orientations 5-8 swap width and height.
  const swap = (meta.orientation ?? 1) >= 5;
  return {
    format: found,
    frames,
    original: bytes,
    sharpInput: found === 'jpeg' ? withJpegEnd(bytes) : bytes,
    sharpOptions: SHARP_OPTIONS,
    probe: { format: found, width: swap ? meta.height : meta.width, height: swap ? meta.width : meta.height, frames },
    hasAlpha: Boolean(meta.hasAlpha),
  };
}

/**
 * HEIC/HEIF (HEVC-coded: every iPhone's photos since 2017) through heic-decode, loaded on the
 * first one. libheif applies the file's rotation and mirror (irot, imir) as it decodes, so the
 * pixels are upright; a grid of tiles (how phones store them) is assembled whole. The header's
 * area was checked first, so no pixel of an oversized file is decoded.
 */
async function openHeic(bytes: Buffer): Promise<SourceImage> {
  const { default: decodeHeic } = await import('heic-decode');
  let decoded: { width: number; height: number; data: Uint8ClampedArray };
  try {
    decoded = await decodeHeic({ buffer: bytes });
  } catch (err) {
    throw new CutoutError('unsupported_format', 'Corrupt or undecodable HEIC file', { cause: err });
  }
  const { width, height } = decoded;
  checkArea(width, height);
  if (decoded.data.length < width * height * 4) throw new CutoutError('unsupported_format', 'Truncated HEIC file');
  let translucent = false;
  for (let i = 3; i < decoded.data.length && !translucent; i += 4) translucent = decoded.data[i] !== 255;
  const rgba = Buffer.from(decoded.data.buffer, decoded.data.byteOffset, width * height * 4);
  return {
    format: 'heic',
    frames: 1,
    original: bytes,
    sharpInput: rgba,
    sharpOptions: { raw: { width, height, channels: 4 } },
    probe: { format: 'heic', width, height, frames: 1 },
    // heic-decode always gives RGBA: an opaque alpha is no alpha.
    hasAlpha: translucent,
  };
}

/** BMP, which sharp cannot read, through bmp-ts into raw RGB. */
async function openBmp(bytes: Buffer): Promise<SourceImage> {
  const { width, height } = readBmpSize(bytes);
  if (!width || !height) throw new CutoutError('unsupported_format', 'Corrupt BMP header');
  checkArea(width, height);
  const bmp = await import('bmp-ts');
  let decoded: { data: Buffer | Uint8Array; width: number; height: number };
  try {
    decoded = bmp.decode(bytes, { toRGBA: true });
  } catch (err) {
    throw new CutoutError('unsupported_format', 'Corrupt or undecodable BMP file', { cause: err });
  }
  const pixels = decoded.width * decoded.height;
  if (decoded.data.length < pixels * 4) throw new CutoutError('unsupported_format', 'Truncated BMP file');
  // bmp-ts leaves alpha at 0 for 24-bit files, and sharp would premultiply by it when resizing:
  // keep RGB only (alpha in BMP is too rare to trust).
  const rgb = Buffer.allocUnsafe(pixels * 3);
  for (let i = 0, j = 0; i < pixels; i++, j += 3) {
    rgb[j] = decoded.data[i * 4];
    rgb[j + 1] = decoded.data[i * 4 + 1];
    rgb[j + 2] = decoded.data[i * 4 + 2];
  }
  return {
    format: 'bmp',
    original: bytes,
    sharpInput: rgb,
    sharpOptions: { raw: { width: decoded.width, height: decoded.height, channels: 3 } },
    probe: { format: 'bmp', width: decoded.width, height: decoded.height, frames: 1 },
    frames: 1,
    hasAlpha: false,
  };
}

/** Header-only probe: format and oriented size. */
export async function probeImage(bytes: Buffer): Promise<ImageProbe> {
  return (await openImage(bytes)).probe;
}

/** `auto` is full up to 4 MP, else preview. */
export function resolveSize(size: Size, width: number, height: number): 'preview' | 'full' {
  if (size === 'auto') return width * height <= LIMITS.autoFullMaxPixels ? 'full' : 'preview';
  return size;
}

/** Output dimensions for a resolved size: previews fit in 800x800, never enlarged. */
export function outputSize(resolved: 'preview' | 'full', width: number, height: number): { width: number; height: number } {
  if (resolved === 'full') return { width, height };
  const scale = Math.min(1, LIMITS.previewMaxSide / Math.max(width, height));
  return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
}

/** `size` shrunk to at most `maxArea` pixels, aspect kept, never enlarged (remove.bg's sizes are areas). */
export function fitArea(size: { width: number; height: number }, maxArea: number): { width: number; height: number } {
  const { width, height } = size;
  if (width * height <= maxArea) return { width, height };
  const k = Math.sqrt(maxArea / (width * height));
  // Rounded down so the area never passes the bound (625x400 of a 1250x800 at 0.25 MP).
  return { width: Math.max(1, Math.floor(width * k + 1e-9)), height: Math.max(1, Math.floor(height * k + 1e-9)) };
}

/** A sharp pipeline of the oriented image, flattened onto white when it has alpha (the model sees RGB). */
export function orientedRgb(src: SourceImage): Sharp {
  let img = sharp(src.sharpInput, src.sharpOptions).rotate();
  if (src.hasAlpha) img = img.flatten({ background: { r: 255, g: 255, b: 255 } });
  return img.removeAlpha();
}

/** Decodes the oriented image at `width` x `height` into interleaved 8-bit RGB. */
export async function decodeRgb(src: SourceImage, width: number, height: number): Promise<Buffer> {
  let img = orientedRgb(src);
  if (width !== src.probe.width || height !== src.probe.height) img = img.resize(width, height, { fit: 'fill' });
  try {
    return await img.raw().toBuffer();
  } catch (err) {
    throw decodeError(err, src.format, src.original);
  }
}
