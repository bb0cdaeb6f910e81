/**
 * Whether an encoded image already has transparency, and the same image with its alpha channel
 * dropped: Clipdrop's `transparency_handling` (docs/clipdrop.md). Apart from decode.ts because
 * only that dialect needs it, and loaded by it on first use (sharp is not loaded by the server's
 * start).
 */
import type sharpModule from 'sharp';
import { requireCjs } from '../cjs.js';

const sharp: typeof sharpModule = requireCjs('sharp');

/** True when some pixel is not fully opaque (an alpha channel alone, all 255, is opaque). */
export async function hasTransparency(bytes: Buffer): Promise<boolean> {
  const meta = await sharp(bytes).metadata();
  if (!meta.hasAlpha) return false;
  return !(await sharp(bytes).stats()).isOpaque;
}

/** The image without its alpha channel (the colours under it kept), upright (EXIF orientation applied), as a lossless PNG. */
export async function withoutAlpha(bytes: Buffer): Promise<Buffer> {
  return sharp(bytes).rotate().removeAlpha().png({ compressionLevel: 1 }).toBuffer();
}
