/**
 * Product photos (docs/product-photos.md), as pure box arithmetic and typed-array math: the
 * subject box and its cropped sides, the canvas and the placement (padding, margin, alignment,
 * snapping), the outline ring, the shadows (drop, float, cast) and the blurs. No I/O and no
 * sharp: compose.ts runs them (the subject's resize is sharp's, there); tested on tiny arrays.
 *
 * Choices where the vendors' docs are vague (docs/product-photos.md says them):
 * - The subject box is where alpha >= 50 %; the copied region is the wider 5 % box (the soft
 *   fringe), moved and scaled with it.
 * - A side of the box within 1 px of the photo's edge is cropped. With snapping on (the default)
 *   a cropped side has no padding and no outline room, and the subject is aligned towards it, so
 *   it touches the canvas's edge less the margin (the margin is never ignored).
 * - Percentages and ratios of a `WxH` or `original` canvas are of its width (left, right) or
 *   height (top, bottom); of a `subject` canvas, of the subject's box.
 */
import type { Space, Spacing } from '../layout-options.js';
import type { ImageOptions } from '../options.js';
import { boundingBox, type Box } from './matte.js';

/** Alpha at or above this is the subject for placement (50 %). */
export const SUBJECT_ALPHA = 128;

export interface Sides { top: boolean; right: boolean; bottom: boolean; left: boolean }

export interface Edges { top: number; right: number; bottom: number; left: number }

/** The sides of `box` that touch the edge of a `width` x `height` photo (within `tolerance` px). */
export function croppedSides(box: Box, width: number, height: number, tolerance = 1): Sides {
  return {
    top: box.top <= tolerance,
    left: box.left <= tolerance,
    bottom: box.top + box.height >= height - tolerance,
    right: box.left + box.width >= width - tolerance,
  };
}

/** A padding, margin or outline length in pixels along an axis of `size` pixels. */
export function spaceAlong(s: Space, size: number): number {
  return s.unit === 'px' ? s.value : s.unit === '%' ? (s.value * size) / 100 : s.value * size;
}

function edgesOf(s: Spacing | undefined, width: number, height: number): Edges {
  if (!s) return { top: 0, right: 0, bottom: 0, left: 0 };
  return { top: spaceAlong(s.top, height), right: spaceAlong(s.right, width), bottom: spaceAlong(s.bottom, height), left: spaceAlong(s.left, width) };
}

/** The layout's part of a request: the options' own fields (options.ts); `snapCropped` false keeps cropped sides' padding. */
export type LayoutRequest = Pick<ImageOptions, 'canvas' | 'maxWidth' | 'maxHeight' | 'padding' | 'margin' | 'align' | 'scaling' | 'outlineWidth'> & {
  snapCropped?: boolean;
};

/** Does the request lay the subject out on a canvas of its own (not the photo as it is)? */
export function placesSubject(r: LayoutRequest): boolean {
  return (r.canvas !== undefined && r.canvas !== 'original') || r.padding !== undefined || r.margin !== undefined || r.align !== undefined || r.scaling !== undefined;
}

/** Does the request change the canvas or the subject's place at all (`max_*` only scales)? */
export function changesCanvas(r: LayoutRequest): boolean {
  return placesSubject(r) || r.maxWidth !== undefined || r.maxHeight !== undefined;
}

export interface Placement {
  /** The canvas's size. */
  width: number;
  height: number;
  /** Output pixels per photo pixel. */
  scale: number;
  /** Where the subject's box lands on the canvas. */
  dest: Box;
  /** The outline's width in output pixels (0: none). */
  outline: number;
}

/** `max_width` / `max_height` as a factor (at most 1) for a canvas of `width` x `height`. */
function bound(width: number, height: number, r: LayoutRequest): number {
  return Math.min(1, r.maxWidth !== undefined ? r.maxWidth / width : 1, r.maxHeight !== undefined ? r.maxHeight / height : 1);
}

/**
 * The canvas and the subject's place on it. `subject` is the subject's box (alpha >= 50 %) in a
 * `photoW` x `photoH` photo.
 */
export function planPlacement(subject: Box, photoW: number, photoH: number, r: LayoutRequest): Placement {
  const snap = r.snapCropped !== false;
  const cut = snap ? croppedSides(subject, photoW, photoH) : { top: false, right: false, bottom: false, left: false };
  const canvas = r.canvas ?? 'original';
  if (!placesSubject(r)) {
    // The photo as it is, scaled down by max_* (the outline a ratio of its long side).
    const k = bound(photoW, photoH, r);
    const width = Math.max(1, Math.round(photoW * k)), height = Math.max(1, Math.round(photoH * k));
    const outline = r.outlineWidth ? spaceAlong(r.outlineWidth, Math.max(width, height)) : 0;
    return { width, height, scale: k, dest: scaledBox(subject, k, 0, 0), outline };
  }
  if (canvas === 'subject') {
    // The subject's box plus the outline, padding (of the box's size) and margin, at scale 1, then bounded.
    const o = r.outlineWidth ? spaceAlong(r.outlineWidth, Math.max(subject.width, subject.height)) : 0;
    const p = edgesOf(r.padding, subject.width, subject.height);
    const m = edgesOf(r.margin, subject.width, subject.height);
    const side = (s: keyof Edges) => m[s] + (cut[s] ? 0 : p[s] + o);
    const w = subject.width + side('left') + side('right'), h = subject.height + side('top') + side('bottom');
    const k = bound(w, h, r);
    const width = Math.max(1, Math.round(w * k)), height = Math.max(1, Math.round(h * k));
    const dest = { left: Math.round(side('left') * k), top: Math.round(side('top') * k), width: Math.max(1, Math.round(subject.width * k)), height: Math.max(1, Math.round(subject.height * k)) };
    return { width, height, scale: k, dest, outline: o * k };
  }
  // A WxH canvas, or the photo's size (then bounded by max_*): the subject fits inside it.
  const kc = canvas === 'original' ? bound(photoW, photoH, r) : 1;
  const width = canvas === 'original' ? Math.max(1, Math.round(photoW * kc)) : canvas.width;
  const height = canvas === 'original' ? Math.max(1, Math.round(photoH * kc)) : canvas.height;
  const o = r.outlineWidth ? spaceAlong(r.outlineWidth, Math.max(width, height)) : 0;
  const p = edgesOf(r.padding, width, height);
  const m = edgesOf(r.margin, width, height);
  const side = (s: keyof Edges) => m[s] + (cut[s] ? 0 : p[s] + o);
  const room = {
    left: side('left'), top: side('top'),
    width: Math.max(1, width - side('left') - side('right')),
    height: Math.max(1, height - side('top') - side('bottom')),
  };
  const k = (r.scaling === 'fill' ? Math.max : Math.min)(room.width / subject.width, room.height / subject.height);
  const w = Math.max(1, Math.round(subject.width * k)), h = Math.max(1, Math.round(subject.height * k));
  const align = r.align ?? { x: 0.5, y: 0.5 };
  // A cropped side pulls the subject towards it (both cropped: centred between them).
  const ax = cut.left !== cut.right ? (cut.left ? 0 : 1) : cut.left ? 0.5 : align.x;
  const ay = cut.top !== cut.bottom ? (cut.top ? 0 : 1) : cut.top ? 0.5 : align.y;
  const dest = { left: Math.round(room.left + (room.width - w) * ax), top: Math.round(room.top + (room.height - h) * ay), width: w, height: h };
  return { width, height, scale: k, dest, outline: o };
}

function scaledBox(b: Box, k: number, dx: number, dy: number): Box {
  return { left: Math.round(b.left * k + dx), top: Math.round(b.top * k + dy), width: Math.max(1, Math.round(b.width * k)), height: Math.max(1, Math.round(b.height * k)) };
}

/** `region` (around `subject`, in photo pixels) where it lands when `subject` goes to `dest`. */
export function regionDest(region: Box, subject: Box, dest: Box, k: number): Box {
  const kx = dest.width / subject.width, ky = dest.height / subject.height;
  void k;
  return {
    left: Math.round(dest.left + (region.left - subject.left) * kx),
    top: Math.round(dest.top + (region.top - subject.top) * ky),
    width: Math.max(1, Math.round(region.width * kx)),
    height: Math.max(1, Math.round(region.height * ky)),
  };
}

// Distances and blurs.

/** The 1-D squared distance transform of Felzenszwalb and Huttenlocher, of `f` (n values) into `d`. */
function edt1(f: Float64Array, n: number, d: Float64Array, v: Int32Array, z: Float64Array): void {
  let k = 0;
  v[0] = 0;
  z[0] = -Infinity;
  z[1] = Infinity;
  for (let q = 1; q < n; q++) {
    if (f[q] === Infinity) continue;
    if (f[v[k]] === Infinity) { v[k] = q; continue; }
    let s = ((f[q] + q * q) - (f[v[k]] + v[k] * v[k])) / (2 * q - 2 * v[k]);
    while (s <= z[k]) {
      k--;
      s = ((f[q] + q * q) - (f[v[k]] + v[k] * v[k])) / (2 * q - 2 * v[k]);
    }
    k++;
    v[k] = q;
    z[k] = s;
    z[k + 1] = Infinity;
  }
  k = 0;
  for (let q = 0; q < n; q++) {
    while (z[k + 1] < q) k++;
    const dq = q - v[k];
    d[q] = f[v[k]] === Infinity ? Infinity : dq * dq + f[v[k]];
  }
}

/** Euclidean distance (pixels) from each pixel to the nearest pixel with `inside[i]`: 0 inside. */
export function distanceTo(inside: (i: number) => boolean, width: number, height: number): Float32Array {
  const n = Math.max(width, height);
  const f = new Float64Array(n), d = new Float64Array(n), z = new Float64Array(n + 1);
  const v = new Int32Array(n);
  const grid = new Float64Array(width * height);
  for (let x = 0; x < width; x++) {
    for (let y = 0; y < height; y++) f[y] = inside(y * width + x) ? 0 : Infinity;
    edt1(f, height, d, v, z);
    for (let y = 0; y < height; y++) grid[y * width + x] = d[y];
  }
  const out = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) f[x] = grid[row + x];
    edt1(f, width, d, v, z);
    for (let x = 0; x < width; x++) out[row + x] = Math.sqrt(d[x]);
  }
  return out;
}

/** One box blur of radius `r` along rows or columns, edges clamped, from `src` into `dst`. */
function boxPass(src: Float32Array, dst: Float32Array, width: number, height: number, r: number, horizontal: boolean): void {
  const lines = horizontal ? height : width, len = horizontal ? width : height;
  const step = horizontal ? 1 : width;
  const last = len - 1;
  const norm = 1 / (2 * r + 1);
  for (let l = 0; l < lines; l++) {
    const base = horizontal ? l * width : l;
    let acc = 0;
    for (let i = -r; i <= r; i++) acc += src[base + (i < 0 ? 0 : i > last ? last : i) * step];
    for (let i = 0; i < len; i++) {
      dst[base + i * step] = acc * norm;
      const add = i + r + 1, drop = i - r;
      acc += src[base + (add > last ? last : add) * step] - src[base + (drop < 0 ? 0 : drop) * step];
    }
  }
}

/** Box radii of three passes whose result is close to a gaussian of `sigma` (Kovesi's). */
function boxRadii(sigma: number): number[] {
  const ideal = Math.sqrt((12 * sigma * sigma) / 3 + 1);
  let wl = Math.floor(ideal);
  if (wl % 2 === 0) wl--;
  const wu = wl + 2;
  const m = Math.round((12 * sigma * sigma - 3 * wl * wl - 12 * wl - 9) / (-4 * wl - 4));
  return [0, 1, 2].map((i) => ((i < m ? wl : wu) - 1) / 2);
}

/** A gaussian blur of a float plane (three box passes each way); `sigma` below 0.5 copies it. */
export function blurPlane(src: Float32Array, width: number, height: number, sigma: number): Float32Array {
  if (sigma < 0.5) return Float32Array.from(src);
  const a = Float32Array.from(src), b = new Float32Array(src.length);
  for (const r of boxRadii(sigma)) {
    if (r <= 0) continue;
    boxPass(a, b, width, height, r, true);
    boxPass(b, a, width, height, r, false);
  }
  return a;
}

/** A disc blur (a lens's bokeh) of radius `r` px: per kernel row, one segment of a row's prefix sums. */
export function discBlur(src: Float32Array, width: number, height: number, r: number): Float32Array {
  const R = Math.max(1, Math.round(r));
  const prefix = new Float64Array((width + 1) * height);
  for (let y = 0; y < height; y++) {
    let acc = 0;
    const p = y * (width + 1);
    for (let x = 0; x < width; x++) { acc += src[y * width + x]; prefix[p + x + 1] = acc; }
  }
  const half = Array.from({ length: 2 * R + 1 }, (_, i) => Math.floor(Math.sqrt(Math.max(0, R * R - (i - R) * (i - R))) + 0.5));
  const out = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let acc = 0, count = 0;
      for (let j = -R; j <= R; j++) {
        const yy = Math.min(height - 1, Math.max(0, y + j));
        const h = half[j + R];
        const x0 = Math.max(0, x - h), x1 = Math.min(width - 1, x + h);
        const p = yy * (width + 1);
        acc += prefix[p + x1 + 1] - prefix[p + x0];
        count += x1 - x0 + 1;
      }
      out[y * width + x] = acc / count;
    }
  }
  return out;
}

// The outline.

/**
 * The outline ring's alpha (0..1) on a `width` x `height` canvas: opaque from the subject's edge
 * (alpha >= 50 %) out to `ringWidth` px, antialiased over its last pixel, blurred by `blurSigma`.
 * Zero where the subject is opaque is not needed: the subject is drawn over it.
 */
export function outlineRing(alpha: Uint8Array, width: number, height: number, ringWidth: number, blurSigma: number): Float32Array {
  const dist = distanceTo((i) => alpha[i] >= SUBJECT_ALPHA, width, height);
  const ring = new Float32Array(width * height);
  for (let i = 0; i < ring.length; i++) {
    const d = dist[i];
    ring[i] = d <= ringWidth ? 1 : d >= ringWidth + 1 ? 0 : ringWidth + 1 - d;
  }
  return blurSigma >= 0.5 ? blurPlane(ring, width, height, blurSigma) : ring;
}

// Shadows.

export type ShadowKind = 'drop' | 'float' | 'cast';

export interface ShadowRequest {
  kind: ShadowKind;
  /** 0..1. */
  opacity: number;
  /** 0..1. */
  softness: number;
  /** Degrees: where the light comes from, clockwise from above. */
  direction: number;
  /** Degrees above the floor (cast). */
  elevation: number;
}

/**
 * The shadow's alpha (0..1, its opacity applied) on the canvas of the subject's `alpha`
 * (subject and outline). It may lie under the subject: the subject is drawn over it. Cut at the
 * canvas's edge. Null when there is no subject.
 */
export function shadowMask(alpha: Uint8Array, width: number, height: number, s: ShadowRequest): Float32Array | null {
  const box = boundingBox(alpha, width, height, SUBJECT_ALPHA);
  if (!box) return null;
  const long = Math.max(box.width, box.height);
  let mask: Float32Array;
  if (s.kind === 'drop') mask = dropShadow(alpha, width, height, long, s);
  else if (s.kind === 'float') mask = floatShadow(alpha, width, height, box, s);
  else mask = castShadow(alpha, width, height, box, s);
  const o = Math.min(1, Math.max(0, s.opacity));
  for (let i = 0; i < mask.length; i++) mask[i] = Math.min(1, Math.max(0, mask[i])) * o;
  return mask;
}

/** The light's direction as the shadow's unit vector on the picture: 0 degrees is (0, 1), straight down. */
export function shadowVector(direction: number): { x: number; y: number } {
  const t = (direction * Math.PI) / 180;
  return { x: -Math.sin(t), y: Math.cos(t) };
}

/** `drop`: the matte moved 2.5 % of the subject's long side away from the light, blurred by the softness. */
function dropShadow(alpha: Uint8Array, width: number, height: number, long: number, s: ShadowRequest): Float32Array {
  const v = shadowVector(s.direction);
  const dist = 0.025 * long;
  const dx = Math.round(v.x * dist), dy = Math.round(v.y * dist);
  const out = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    const sy = y - dy;
    if (sy < 0 || sy >= height) continue;
    for (let x = 0; x < width; x++) {
      const sx = x - dx;
      if (sx >= 0 && sx < width) out[y * width + x] = alpha[sy * width + sx] / 255;
    }
  }
  return blurPlane(out, width, height, s.softness * 0.03 * long);
}

/**
 * `float`: a soft ellipse a little below the subject's box, as wide as its base (the widest run
 * of its bottom 8 % rows, at least 30 % of the box), about a tenth as tall; the softness widens
 * its soft rim. The direction does not move it (the light of a hovering product is overhead).
 */
function floatShadow(alpha: Uint8Array, width: number, height: number, box: Box, s: ShadowRequest): Float32Array {
  const rows = Math.max(1, Math.round(box.height * 0.08));
  let left = box.left + box.width, right = box.left;
  for (let y = box.top + box.height - rows; y < box.top + box.height; y++) {
    for (let x = box.left; x < box.left + box.width; x++) {
      if (alpha[y * width + x] >= SUBJECT_ALPHA) { if (x < left) left = x; if (x > right) right = x; }
    }
  }
  const base = Math.max(right - left + 1, box.width * 0.3);
  const cx = right >= left ? (left + right + 1) / 2 : box.left + box.width / 2;
  const rx = base * 0.55 * (1 + 0.3 * s.softness);
  const ry = Math.max(2, rx * 0.12);
  const cy = box.top + box.height + Math.max(1, box.height * 0.015);
  const core = Math.max(0, 0.75 - 0.65 * s.softness);
  const out = new Float32Array(width * height);
  const y0 = Math.max(0, Math.floor(cy - ry)), y1 = Math.min(height - 1, Math.ceil(cy + ry));
  const x0 = Math.max(0, Math.floor(cx - rx)), x1 = Math.min(width - 1, Math.ceil(cx + rx));
  for (let y = y0; y <= y1; y++) {
    for (let x = x0; x <= x1; x++) {
      const ex = (x + 0.5 - cx) / rx, ey = (y + 0.5 - cy) / ry;
      const r = Math.sqrt(ex * ex + ey * ey);
      if (r >= 1) continue;
      const t = r <= core ? 0 : (r - core) / (1 - core);
      out[y * width + x] = 0.5 * (1 + Math.cos(Math.PI * t));
    }
  }
  return out;
}

/**
 * `cast`: the silhouette thrown onto the floor from the bottom of the subject's box by a light at
 * `direction` and `elevation`. A point `h` above the base lands `h / tan(elevation)` away along
 * the floor: across the picture as it is, in depth foreshortened by half (the floor recedes).
 * Sharp where it meets the subject, softer and fainter with distance.
 */
function castShadow(alpha: Uint8Array, width: number, height: number, box: Box, s: ShadowRequest): Float32Array {
  const v = shadowVector(s.direction);
  const len = 1 / Math.tan((Math.min(85, Math.max(5, s.elevation)) * Math.PI) / 180);
  const a = v.x * len;
  let b = v.y * len * 0.5;
  if (Math.abs(b) < 0.02) b = b < 0 ? -0.02 : 0.02;
  const yb = box.top + box.height;
  const H = box.height;
  const sharp = new Float32Array(width * height);
  const reach = new Float32Array(width * height);
  const yEnd = yb + b * H;
  const y0 = Math.max(0, Math.floor(Math.min(yb, yEnd))), y1 = Math.min(height - 1, Math.ceil(Math.max(yb, yEnd)));
  const xs = [box.left, box.left + box.width, box.left + a * H, box.left + box.width + a * H];
  const x0 = Math.max(0, Math.floor(Math.min(...xs))), x1 = Math.min(width - 1, Math.ceil(Math.max(...xs)));
  for (let y = y0; y <= y1; y++) {
    const h = (y + 0.5 - yb) / b;
    if (h < 0 || h > H) continue;
    const sy = Math.round(yb - h - 0.5);
    if (sy < 0 || sy >= height) continue;
    for (let x = x0; x <= x1; x++) {
      const sx = Math.round(x - a * h);
      if (sx < 0 || sx >= width) continue;
      const i = y * width + x;
      sharp[i] = alpha[sy * width + sx] / 255;
      reach[i] = h / H;
    }
  }
  const soft = blurPlane(sharp, width, height, (0.01 + 0.04 * s.softness) * Math.max(box.width, H));
  const out = new Float32Array(width * height);
  for (let i = 0; i < out.length; i++) {
    const t = reach[i];
    const m = sharp[i] > 0 || soft[i] > 0 ? (1 - t) * sharp[i] + t * soft[i] : 0;
    out[i] = m * (1 - 0.6 * t);
  }
  // The soft rim beyond the silhouette, fading as the far end does.
  for (let i = 0; i < out.length; i++) if (sharp[i] === 0 && soft[i] > 0) out[i] = Math.max(out[i], soft[i] * 0.4);
  return out;
}

// The background blur.

/**
 * The photo's own background blurred (`rgb` interleaved, `alpha` the matte): the subject's
 * pixels are left out of the average (each weighted by 1 - alpha), so no halo of the subject
 * spreads into it; where the subject covers everything around, the plain blur fills in. Blurred
 * at a reduced size when the radius is large (a blur's result has no fine detail to lose).
 * `radius` in pixels; `bokeh`: a disc in linear light (highlights stay bright), else a gaussian
 * of sigma radius / 2.
 */
export function blurredBackground(rgb: Uint8Array, alpha: Uint8Array, width: number, height: number, radius: number, bokeh: boolean): Buffer {
  const f = Math.max(1, Math.floor(radius / (bokeh ? 6 : 4)));
  const w = Math.ceil(width / f), h = Math.ceil(height / f);
  const lin = new Float32Array(256);
  for (let i = 0; i < 256; i++) lin[i] = bokeh ? (i / 255) ** 2.2 : i / 255;
  // Pooled planes: weighted colour (0-2), weight (3), and the plain colour (4-6).
  const planes = Array.from({ length: 7 }, () => new Float32Array(w * h));
  const [r0, g0, b0, w0, r1, g1, b1] = planes;
  for (let y = 0; y < height; y++) {
    const py = Math.floor(y / f) * w;
    for (let x = 0; x < width; x++) {
      const i = y * width + x, p = py + ((x / f) | 0), j = i * 3;
      const wt = 1 - alpha[i] / 255;
      const vr = lin[rgb[j]], vg = lin[rgb[j + 1]], vb = lin[rgb[j + 2]];
      r0[p] += vr * wt; g0[p] += vg * wt; b0[p] += vb * wt; w0[p] += wt;
      r1[p] += vr; g1[p] += vg; b1[p] += vb;
    }
  }
  const share = 1 / (f * f);
  for (let y = 0; y < h; y++) {
    // Edge cells hold fewer pixels.
    const rows = Math.min(f, height - y * f);
    for (let x = 0; x < w; x++) {
      const k = rows * Math.min(f, width - x * f) === f * f ? share : 1 / (rows * Math.min(f, width - x * f));
      for (const plane of planes) plane[y * w + x] *= k;
    }
  }
  const r = radius / f;
  const [br, bg, bb, bw, pr, pg, pb] = planes.map((plane) => (bokeh ? discBlur(plane, w, h, r) : blurPlane(plane, w, h, r / 2)));
  const out = Buffer.allocUnsafe(width * height * 3);
  const gamma = new Float32Array(4097);
  for (let i = 0; i <= 4096; i++) gamma[i] = Math.round(255 * (bokeh ? (i / 4096) ** (1 / 2.2) : i / 4096));
  const enc = (v: number) => gamma[v <= 0 ? 0 : v >= 1 ? 4096 : (v * 4096 + 0.5) | 0];
  for (let y = 0; y < height; y++) {
    // Bilinear upsampling of the pooled planes (pixel centres aligned).
    const fy = Math.min(h - 1, Math.max(0, (y + 0.5) / f - 0.5));
    const ya = Math.floor(fy), yb = Math.min(h - 1, ya + 1), ty = fy - ya;
    for (let x = 0; x < width; x++) {
      const fx = Math.min(w - 1, Math.max(0, (x + 0.5) / f - 0.5));
      const xa = fx | 0, xb = Math.min(w - 1, xa + 1), tx = fx - xa;
      const i00 = ya * w + xa, i01 = ya * w + xb, i10 = yb * w + xa, i11 = yb * w + xb;
      const c00 = (1 - tx) * (1 - ty), c01 = tx * (1 - ty), c10 = (1 - tx) * ty, c11 = tx * ty;
      const wt = bw[i00] * c00 + bw[i01] * c01 + bw[i10] * c10 + bw[i11] * c11;
      const o = (y * width + x) * 3;
      if (wt > 0.02) {
        out[o] = enc((br[i00] * c00 + br[i01] * c01 + br[i10] * c10 + br[i11] * c11) / wt);
        out[o + 1] = enc((bg[i00] * c00 + bg[i01] * c01 + bg[i10] * c10 + bg[i11] * c11) / wt);
        out[o + 2] = enc((bb[i00] * c00 + bb[i01] * c01 + bb[i10] * c10 + bb[i11] * c11) / wt);
      } else {
        out[o] = enc(pr[i00] * c00 + pr[i01] * c01 + pr[i10] * c10 + pr[i11] * c11);
        out[o + 1] = enc(pg[i00] * c00 + pg[i01] * c01 + pg[i10] * c10 + pg[i11] * c11);
        out[o + 2] = enc(pb[i00] * c00 + pb[i01] * c01 + pb[i10] * c10 + pb[i11] * c11);
      }
    }
  }
  return out;
}

/**
 * Interleaved RGB of a `sw` x `sh` picture on a `width` x `height` canvas where photo pixel
 * (x, y) lands at (x * k + dx, y * k + dy), bilinear; when that does not cover the canvas, the
 * picture centred and resized to cover it instead.
 */
export function placePicture(rgb: Uint8Array, sw: number, sh: number, width: number, height: number, k: number, dx: number, dy: number): Buffer {
  const covers = dx <= 0 && dy <= 0 && sw * k + dx >= width && sh * k + dy >= height;
  if (!covers) {
    k = Math.max(width / sw, height / sh);
    dx = (width - sw * k) / 2;
    dy = (height - sh * k) / 2;
  }
  const out = Buffer.allocUnsafe(width * height * 3);
  for (let y = 0; y < height; y++) {
    const fy = Math.min(sh - 1, Math.max(0, (y + 0.5 - dy) / k - 0.5));
    const y0 = Math.floor(fy), y1 = Math.min(sh - 1, y0 + 1), ty = fy - y0;
    for (let x = 0; x < width; x++) {
      const fx = Math.min(sw - 1, Math.max(0, (x + 0.5 - dx) / k - 0.5));
      const x0 = Math.floor(fx), x1 = Math.min(sw - 1, x0 + 1), tx = fx - x0;
      const o = (y * width + x) * 3;
      for (let c = 0; c < 3; c++) {
        const v = (rgb[(y0 * sw + x0) * 3 + c] * (1 - tx) + rgb[(y0 * sw + x1) * 3 + c] * tx) * (1 - ty)
          + (rgb[(y1 * sw + x0) * 3 + c] * (1 - tx) + rgb[(y1 * sw + x1) * 3 + c] * tx) * ty;
        out[o + c] = v + 0.5;
      }
    }
  }
  return out;
}
