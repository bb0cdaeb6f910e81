/**
 * What lies under the subject: a colour with an alpha, or a picture (remove.bg's `bg_image_*`),
 * centred and resized to cover the canvas with its aspect kept. Compositing is pure typed-array
 * code (straight, not premultiplied, alpha: the cutout's colours are the estimated foreground's).
 */
import type sharpModule from 'sharp';
import { requireCjs } from '../cjs.js';
import { CutoutError } from '../errors.js';
import { OptionError, type Rgb } from '../options.js';
import { decodeError, openImage } from './decode.js';

const sharp: typeof sharpModule = requireCjs('sharp');

/** A layer of interleaved RGB and its alpha (null: opaque everywhere). */
export interface Layer { rgb: Buffer; alpha: Uint8Array | null }

/**
 * The subject (`rgb` + `alpha`) over a background: RGBA pixels of the same size, or one colour
 * (its `a` absent: opaque). Porter-Duff "over": alpha = a + b(1 - a), colour weighted by each
 * layer's share. The alpha is null when the result is opaque everywhere.
 */
export function overBackground(rgb: Uint8Array, alpha: Uint8Array, background: Uint8Array | Rgb): Layer {
  const n = alpha.length;
  const out = Buffer.allocUnsafe(n * 3);
  const outAlpha = new Uint8Array(n);
  const constant = background instanceof Uint8Array ? null : background;
  const image = background instanceof Uint8Array ? background : null;
  let opaque = true;
  for (let i = 0, j = 0; i < n; i++, j += 3) {
    const a = alpha[i];
    let br: number, bg: number, bb: number, ba: number;
    if (constant) {
      br = constant.r; bg = constant.g; bb = constant.b; ba = constant.a ?? 255;
    } else {
      const k = i * 4;
      br = image![k]; bg = image![k + 1]; bb = image![k + 2]; ba = image![k + 3];
    }
    // Weights in 0..65025: the subject's a*255, the background's b*(255 - a).
    const wf = a * 255;
    const wb = ba * (255 - a);
    const sum = wf + wb;
    const oa = Math.round(sum / 255);
    outAlpha[i] = oa;
    if (oa < 255) opaque = false;
    if (sum === 0) {
      out[j] = out[j + 1] = out[j + 2] = 0;
      continue;
    }
    out[j] = (rgb[j] * wf + br * wb + (sum >> 1)) / sum;
    out[j + 1] = (rgb[j + 1] * wf + bg * wb + (sum >> 1)) / sum;
    out[j + 2] = (rgb[j + 2] * wf + bb * wb + (sum >> 1)) / sum;
  }
  return { rgb: out, alpha: opaque ? null : outAlpha };
}

/**
 * A background picture's pixels as RGBA at `width` x `height`: oriented, centred, resized to cover
 * (cropped, aspect kept; not resized when already that size). The same format and size limits as
 * an input image; what cannot be read is an `invalid_request` naming `bg_image`.
 */
export async function coverPicture(bytes: Buffer, width: number, height: number): Promise<Buffer> {
  let src;
  try {
    src = await openImage(bytes);
  } catch (err) {
    throw backgroundError(err);
  }
  try {
    let img = sharp(src.sharpInput, src.sharpOptions).rotate();
    if (src.probe.width !== width || src.probe.height !== height) img = img.resize(width, height, { fit: 'cover', position: 'centre' });
    return await img.ensureAlpha().raw().toBuffer();
  } catch (err) {
    throw backgroundError(decodeError(err, src.format, bytes));
  }
}

function backgroundError(err: unknown): CutoutError {
  const reason = err instanceof CutoutError ? err.message : 'undecodable image';
  const code = err instanceof CutoutError && err.code === 'image_too_large' ? 'file_too_large' : 'failed_to_read_image';
  return new OptionError('bg_image', `The background image cannot be used: ${reason}`, code);
}
