/**
 * Matte + pixels -> the encoded result: attach the alpha (or write the matte alone), flatten onto
 * a colour, crop to the subject's box, encode png/webp/jpg with settings chosen for speed at
 * large sizes (a default-level PNG of 12 MP takes about a second).
 */
import type sharpModule from 'sharp';
import type { Sharp } from 'sharp';
import { requireCjs } from '../cjs.js';
import type { Rgb } from '../options.js';
import type { OutputFormat } from './types.js';
import { boundingBox, clearTransparent, cropRaw, flattenOnto, type Box } from './matte.js';

const sharp: typeof sharpModule = requireCjs('sharp');

/** Encoder settings: lossless PNG at a fast zlib level; WebP and JPEG at high quality, low effort. */
export const ENCODE = Object.freeze({
  png: { compressionLevel: 1, adaptiveFiltering: false },
  webp: { quality: 90, alphaQuality: 100, effort: 2 },
  jpg: { quality: 90, chromaSubsampling: '4:4:4' },
});

const WHITE: Rgb = { r: 255, g: 255, b: 255 };

export interface ComposeOptions {
  format: OutputFormat;
  bgColor: Rgb | null;
  crop: boolean;
  mask?: boolean;
}

export interface Composed {
  data: Buffer;
  width: number;
  height: number;
  /** 1 for a mask; 4 for a cutout with alpha or a raw one; 3 for a flattened encoded one. */
  channels: 1 | 3 | 4;
}

function encode(img: Sharp, format: OutputFormat): Promise<Buffer> {
  if (format === 'raw') return img.raw().toBuffer();
  if (format === 'png') return img.png(ENCODE.png).toBuffer();
  if (format === 'webp') return img.webp(ENCODE.webp).toBuffer();
  return img.jpeg(ENCODE.jpg).toBuffer();
}

/**
 * Builds the output image. `rgb` is interleaved 8-bit RGB and `alpha` the matte, both width x height.
 * JPEG has no alpha: without a `bgColor` it is flattened onto white (as remove.bg does).
 * For a transparent output the colour of fully transparent pixels is cleared in `rgb`, in place.
 */
export async function compose(rgb: Uint8Array, alpha: Uint8Array, width: number, height: number, opts: ComposeOptions): Promise<Composed> {
  let box: Box = { left: 0, top: 0, width, height };
  if (opts.crop) box = boundingBox(alpha, width, height) ?? box;
  const cropped = box.width !== width || box.height !== height;
  const a = cropped ? cropRaw(alpha, width, 1, box) : alpha;
  const raw1 = { raw: { width: box.width, height: box.height, channels: 1 as const } };
  if (opts.mask) {
    // Raw: the matte's own bytes, no copy through libvips.
    const data = opts.format === 'raw' ? Buffer.from(a.buffer, a.byteOffset, a.byteLength) : await encode(sharp(a, raw1).toColourspace('b-w'), opts.format);
    return { data, width: box.width, height: box.height, channels: 1 };
  }
  const c = cropped ? cropRaw(rgb, width, 3, box) : rgb;
  const raw3 = { raw: { width: box.width, height: box.height, channels: 3 as const } };
  const background = opts.bgColor ?? (opts.format === 'jpg' ? WHITE : null);
  if (!background) clearTransparent(c, a);
  let img = background
    ? sharp(flattenOnto(c, a, background), raw3)
    : sharp(c, raw3).joinChannel(Buffer.from(a.buffer, a.byteOffset, a.byteLength), raw1);
  // Raw is always RGBA, so that a caller's chain sees one layout whatever the background.
  if (background && opts.format === 'raw') img = img.ensureAlpha(1);
  const data = await encode(img, opts.format);
  return { data, width: box.width, height: box.height, channels: background && opts.format !== 'raw' ? 3 : 4 };
}
