/**
 * Where the subject lands on the result's canvas: remove.bg's `roi`, `crop` with `crop_margin`,
 * `scale` and `position`, as pure box arithmetic and row copies (compose.ts runs them; resizing
 * a scaled subject is sharp's, there). No I/O: tested on tiny arrays.
 *
 * Decisions where remove.bg's text is silent (docs/removebg.md):
 * - A crop margin may take the canvas past the image: the part outside the image is transparent
 *   (or the background), so a subject at the edge still gets its full margin.
 * - Pixel margins are the result's pixels; percentages are of the subject box's height (top,
 *   bottom) or width (left, right).
 * - `scale` fits the subject's box inside that share of the canvas (aspect kept), and `position`
 *   then places it: `center` unless a position is given. With `crop`, the canvas is the cropped one.
 * - `position=original` with a `scale`: the subject is scaled about its own centre.
 */
import type { Length, Margin, Position, Roi } from '../layout-options.js';
import { OptionError } from '../options.js';
import type { Box } from './matte.js';

/** A length along an axis of `size` pixels: pixels as they are, or percent of `size`. */
function lengthAlong(l: Length, size: number): number {
  return l.unit === '%' ? (l.value * size) / 100 : l.value;
}

/**
 * The roi in output pixels (`outW` x `outH`, the input `inW` x `inH` resized): its pixel values are
 * the input's. Refuses a rectangle outside the image (`roi_exceeds_bounds`) or one without area
 * (`roi_region_empty`).
 */
export function resolveRoi(roi: Roi, inW: number, inH: number, outW: number, outH: number): Box {
  const x1 = lengthAlong(roi.x1, inW), x2 = lengthAlong(roi.x2, inW);
  const y1 = lengthAlong(roi.y1, inH), y2 = lengthAlong(roi.y2, inH);
  if (x2 > inW || y2 > inH || x1 > inW || y1 > inH) {
    throw new OptionError('roi', `roi ${[x1, y1, x2, y2].map((v) => Math.round(v)).join(' ')} (px) exceeds the image's ${inW}x${inH}`, 'roi_exceeds_bounds');
  }
  const left = Math.floor((x1 * outW) / inW), right = Math.min(outW, Math.ceil((x2 * outW) / inW));
  const top = Math.floor((y1 * outH) / inH), bottom = Math.min(outH, Math.ceil((y2 * outH) / inH));
  if (x2 <= x1 || y2 <= y1 || right <= left || bottom <= top) {
    throw new OptionError('roi', 'roi is empty: x2 must be right of x1 and y2 below y1', 'roi_region_empty');
  }
  return { left, top, width: right - left, height: bottom - top };
}

/** Clears the matte outside `box`, in place; true when any foreground is left inside. */
export function keepInside(alpha: Uint8Array, width: number, height: number, box: Box): boolean {
  let any = false;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    if (y < box.top || y >= box.top + box.height) {
      alpha.fill(0, row, row + width);
      continue;
    }
    alpha.fill(0, row, row + box.left);
    alpha.fill(0, row + box.left + box.width, row + width);
    for (let x = box.left; x < box.left + box.width && !any; x++) if (alpha[row + x] !== 0) any = true;
  }
  return any;
}

/** The subject's box grown by the margin; it may reach past the image (negative left/top, or beyond). */
export function marginBox(subject: Box, margin: Margin): Box {
  const top = Math.round(lengthAlong(margin.top, subject.height));
  const bottom = Math.round(lengthAlong(margin.bottom, subject.height));
  const left = Math.round(lengthAlong(margin.left, subject.width));
  const right = Math.round(lengthAlong(margin.right, subject.width));
  return { left: subject.left - left, top: subject.top - top, width: subject.width + left + right, height: subject.height + top + bottom };
}

/**
 * Where the subject's box (`subject`, in canvas coordinates) goes on a `canvasW` x `canvasH`
 * canvas: its size after `scale` (undefined: kept), its place after `position`.
 */
export function placeSubject(subject: Box, canvasW: number, canvasH: number, scale: number | undefined, position: Position): Box {
  let { width, height } = subject;
  if (scale !== undefined) {
    const k = Math.min((scale * canvasW) / subject.width, (scale * canvasH) / subject.height);
    width = Math.max(1, Math.round(subject.width * k));
    height = Math.max(1, Math.round(subject.height * k));
  }
  if (position === 'original') {
    const cx = subject.left + subject.width / 2, cy = subject.top + subject.height / 2;
    return { left: Math.round(cx - width / 2), top: Math.round(cy - height / 2), width, height };
  }
  const share = position === 'center' ? { x: 0.5, y: 0.5 } : position;
  return { left: Math.round((canvasW - width) * share.x), top: Math.round((canvasH - height) * share.y), width, height };
}

/**
 * Copies the `from` rectangle of `src` (`srcW` x `srcH`, `channels` interleaved; it may reach past
 * the source, whose outside reads as zero) to (`toLeft`, `toTop`) of `dst` (`dstW` x `dstH`),
 * clipped to both. `dst` is expected zeroed where nothing is copied.
 */
export function blit(
  src: Uint8Array, srcW: number, srcH: number, channels: number, from: Box,
  dst: Uint8Array, dstW: number, dstH: number, toLeft: number, toTop: number,
): void {
  // Clip the rectangle's left/top against both images' origins, then its size against both ends.
  const cutX = Math.max(0, -from.left, -toLeft);
  const cutY = Math.max(0, -from.top, -toTop);
  const sx = from.left + cutX, dx = toLeft + cutX;
  const sy = from.top + cutY, dy = toTop + cutY;
  const w = Math.min(from.width - cutX, srcW - sx, dstW - dx);
  const h = Math.min(from.height - cutY, srcH - sy, dstH - dy);
  if (w <= 0 || h <= 0) return;
  const bytes = w * channels;
  for (let y = 0; y < h; y++) {
    const s = ((sy + y) * srcW + sx) * channels;
    dst.set(src.subarray(s, s + bytes), ((dy + y) * dstW + dx) * channels);
  }
}

/** Does this request move or resize the subject (beyond a plain crop)? */
export function movesSubject(scale: number | undefined, position: Position | undefined): boolean {
  return scale !== undefined || (position !== undefined && position !== 'original');
}
