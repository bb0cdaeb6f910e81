/**
 * Animations with a known subject in every frame (issue 55): the committed cut-out
 * (test/fixtures/animation/subject.png, RGBA) over a drawn background, moved along a path, with
 * an optional ball that moves while the subject stands still. The truth of frame i is the
 * subject's own alpha where it was placed. Written as GIF, WebP or APNG.
 */
import path from 'node:path';
import sharp from 'sharp';
import { createRequire } from 'node:module';

const UPNG = createRequire(import.meta.url)('upng-js') as typeof import('upng-js');

export const SUBJECT = path.join(import.meta.dirname, '..', 'fixtures', 'animation', 'subject.png');

export interface Scene {
  width: number;
  height: number;
  /** RGBA, one per frame. */
  frames: Buffer[];
  /** The subject's alpha in each frame (0..255). */
  truth: Uint8Array[];
  delays: number[];
}

/** A soft two-colour gradient with a faint grid: something a background can be, never a subject. */
function background(width: number, height: number): Buffer {
  const out = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      const grid = x % 32 === 0 || y % 32 === 0 ? 10 : 0;
      out[i] = 60 + Math.round((120 * x) / width) + grid;
      out[i + 1] = 150 + Math.round((60 * y) / height) + grid;
      out[i + 2] = 190 - Math.round((80 * x) / width);
      out[i + 3] = 255;
    }
  }
  return out;
}

/**
 * `count` frames of `width` x `height`: the subject at `at(i)` (its top-left corner), and with
 * `ball` a red disc of radius 14 crossing the top-right corner, away from the subject.
 */
export async function movingScene(opts: { width: number; height: number; count: number; at: (i: number) => { x: number; y: number }; ball?: boolean }): Promise<Scene> {
  const { width, height, count } = opts;
  const { data: subject, info } = await sharp(SUBJECT).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const base = background(width, height);
  const frames: Buffer[] = [];
  const truth: Uint8Array[] = [];
  for (let f = 0; f < count; f++) {
    const frame = Buffer.from(base);
    const alpha = new Uint8Array(width * height);
    if (opts.ball) {
      const cx = width - 60 + Math.round(40 * Math.cos((2 * Math.PI * f) / count));
      const cy = 40;
      for (let y = cy - 14; y <= cy + 14; y++) for (let x = cx - 14; x <= cx + 14; x++) {
        if ((x - cx) ** 2 + (y - cy) ** 2 > 196 || x < 0 || y < 0 || x >= width || y >= height) continue;
        const i = (y * width + x) * 4;
        frame[i] = 220; frame[i + 1] = 30; frame[i + 2] = 30;
      }
    }
    const { x: left, y: top } = opts.at(f);
    for (let y = 0; y < info.height; y++) for (let x = 0; x < info.width; x++) {
      const X = left + x, Y = top + y;
      if (X < 0 || Y < 0 || X >= width || Y >= height) continue;
      const s = (y * info.width + x) * 4, d = (Y * width + X) * 4, a = subject[s + 3];
      for (let c = 0; c < 3; c++) frame[d + c] = Math.round((subject[s + c] * a + frame[d + c] * (255 - a)) / 255);
      alpha[Y * width + X] = a;
    }
    frames.push(frame);
    truth.push(alpha);
  }
  return { width, height, frames, truth, delays: frames.map((_, i) => 80 + 10 * (i % 3)) };
}

/** The scene as an animated file. */
export async function encodeScene(scene: Scene, format: 'gif' | 'webp' | 'png'): Promise<Buffer> {
  const { width, height, frames, delays } = scene;
  if (format === 'png') return Buffer.from(UPNG.encode(frames.map((f) => Uint8Array.from(f).buffer), width, height, 0, delays));
  const img = sharp(Buffer.concat(frames), { raw: { width, height: height * frames.length, channels: 4, pageHeight: height } });
  return format === 'gif' ? img.gif({ delay: delays, loop: 0 }).toBuffer() : img.webp({ delay: delays, loop: 0, quality: 90 }).toBuffer();
}

/** The frames of an animated result as alpha planes (sharp reads GIF and WebP; upng-js APNG). */
export async function resultAlphas(data: Buffer): Promise<{ alphas: Uint8Array[]; delays: number[]; width: number; height: number }> {
  if (data[0] === 0x89) {
    const img = UPNG.decode(data);
    const rgba = UPNG.toRGBA8(img).map((b) => new Uint8Array(b));
    return { alphas: rgba.map((f) => f.filter((_, i) => i % 4 === 3)), delays: img.frames.map((f) => f.delay), width: img.width, height: img.height };
  }
  const meta = await sharp(data, { pages: -1 }).metadata();
  const { data: px, info } = await sharp(data, { pages: -1 }).ensureAlpha().extractChannel(3).raw().toBuffer({ resolveWithObject: true });
  const h = meta.pageHeight ?? info.height;
  const n = info.height / h;
  return { alphas: Array.from({ length: n }, (_, i) => new Uint8Array(px.subarray(i * info.width * h, (i + 1) * info.width * h))), delays: meta.delay ?? [], width: info.width, height: h };
}

/** Intersection over union of two alphas thresholded at half. */
export function iou(a: Uint8Array, b: Uint8Array): number {
  let inter = 0, union = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] >= 128, y = b[i] >= 128;
    if (x && y) inter++;
    if (x || y) union++;
  }
  return union ? inter / union : 1;
}

/** The largest share of the alpha range (0..1) by which `mask`'s pixels change from one frame to the next, mean over the mask. */
export function flicker(alphas: Uint8Array[], mask: Uint8Array): number {
  let worst = 0;
  for (let f = 1; f < alphas.length; f++) {
    let sum = 0, n = 0;
    for (let i = 0; i < mask.length; i++) if (mask[i]) { sum += Math.abs(alphas[f][i] - alphas[f - 1][i]); n++; }
    worst = Math.max(worst, n ? sum / n / 255 : 0);
  }
  return worst;
}
