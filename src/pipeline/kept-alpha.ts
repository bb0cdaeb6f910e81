/**
 * `keep_alpha=auto` (docs/product-photos.md): an input that already has transparency keeps its
 * own alpha as the matte, and the model does not run (Photoroom's `keepExistingAlphaChannel=auto`,
 * Clipdrop's `return_input_if_non_opaque`). An input whose alpha is opaque everywhere goes to the
 * model as any other.
 */
import type sharpModule from 'sharp';
import { requireCjs } from '../cjs.js';
import { decodeError, type SourceImage } from './decode.js';
import { exifForOutput, rgbProfile, type KeptMetadata } from './metadata.js';

const sharp: typeof sharpModule = requireCjs('sharp');

/**
 * The oriented image at `width` x `height` as RGB (its colours, not flattened) and its alpha, or
 * null when it has no alpha channel or every pixel of it is opaque.
 */
export async function keptAlpha(src: SourceImage, width: number, height: number): Promise<{ rgb: Buffer; alpha: Uint8Array } | null> {
  if (!src.hasAlpha) return null;
  let rgba: Buffer;
  try {
    let img = sharp(src.sharpInput, src.sharpOptions).rotate().ensureAlpha();
    if (width !== src.probe.width || height !== src.probe.height) img = img.resize(width, height, { fit: 'fill' });
    rgba = await img.raw().toBuffer();
  } catch (err) {
    throw decodeError(err, src.format, src.original);
  }
  const n = width * height;
  const alpha = new Uint8Array(n);
  let translucent = false;
  for (let i = 0; i < n; i++) {
    alpha[i] = rgba[i * 4 + 3];
    if (alpha[i] !== 255) translucent = true;
  }
  if (!translucent) return null;
  const rgb = Buffer.allocUnsafe(n * 3);
  for (let i = 0; i < n; i++) {
    rgb[i * 3] = rgba[i * 4];
    rgb[i * 3 + 1] = rgba[i * 4 + 1];
    rgb[i * 3 + 2] = rgba[i * 4 + 2];
  }
  return { rgb, alpha };
}

/** `keep_metadata`: the input's EXIF (orientation reset) and XMP, as compose writes them (metadata.ts). */
export async function readMetadata(src: SourceImage): Promise<KeptMetadata> {
  if (src.format === 'raw' || src.format === 'bmp') return {};
  // A HEIC's pixels reach sharp decoded (decode.ts); its metadata is read from its own bytes.
  const meta = src.format === 'heic' ? await sharp(src.original).metadata() : await sharp(src.sharpInput, src.sharpOptions).metadata();
  return { exif: exifForOutput(meta.exif), xmp: meta.xmp?.toString('utf8'), icc: rgbProfile(meta.icc) };
}
