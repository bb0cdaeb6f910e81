/**
 * Edge quality, as pure typed-array code (tested on tiny arrays):
 *
 * - Guided upsampling of the matte (He & Sun's fast guided filter): the linear coefficients
 *   a, b of q = a * I + b are fitted on the model's low-resolution grid, where the matte lives, then
 *   bilinearly upsampled and applied to the full-resolution guide I (luma). The matte's edges
 *   follow the photo's edges at full resolution instead of a bilinear blur of a 1024 grid.
 * - A hard matte (threshold) for stickers and icons.
 * Foreground colour estimation is in foreground.ts.
 */
import { axisTable } from './matte.js';

/**
 * Mean over a (2r+1)x(2r+1) window, clamped at the borders (divided by the number of pixels
 * inside the image). O(n) whatever r, with running sums (the foreground colour estimation runs
 * it eight times per image with a wide radius).
 */
export function boxMean(src: Float32Array, w: number, h: number, r: number, target?: Float32Array): Float32Array {
  const out = target ?? new Float32Array(w * h);
  const tmp = rowWindowSums(src, w, h, r, new Float32Array(w * h));
  const invX = windowInverses(w, r);
  // Vertical pass: one running sum per column, updated by whole rows.
  const colSum = new Float64Array(w);
  for (let y = 0; y <= Math.min(r, h - 1); y++) addRow(colSum, tmp, y * w, 1);
  for (let y = 0; y < h; y++) {
    const inv = 1 / (Math.min(h - 1, y + r) - Math.max(0, y - r) + 1);
    const row = y * w;
    for (let x = 0; x < w; x++) out[row + x] = colSum[x] * invX[x] * inv;
    slideColumns(colSum, tmp, w, h, r, y);
  }
  return out;
}

/** 1 / (pixels of the clamped window) along an axis of length `w`, per position. */
function windowInverses(w: number, r: number): Float32Array {
  const inv = new Float32Array(w);
  for (let x = 0; x < w; x++) inv[x] = 1 / (Math.min(w - 1, x + r) - Math.max(0, x - r) + 1);
  return inv;
}

/**
 * Horizontal pass: the sum over [x - r, x + r] (clamped) along each row, with a running sum.
 * The loops are split so that the inner ones carry no bounds tests.
 */
function rowWindowSums(src: Float32Array, w: number, h: number, r: number, dst: Float32Array): Float32Array {
  const headEnd = Math.min(w, r); // x < headEnd: nothing leaves the window on the step to x + 1
  const tailStart = Math.max(headEnd, w - r - 1); // x >= tailStart: nothing enters any more
  for (let y = 0; y < h; y++) {
    const row = y * w;
    let sum = 0;
    for (let x = 0; x < Math.min(r, w - 1) + 1; x++) sum += src[row + x];
    let x = 0;
    for (; x < headEnd; x++) {
      dst[row + x] = sum;
      if (x + r + 1 < w) sum += src[row + x + r + 1];
    }
    for (; x < tailStart; x++) {
      dst[row + x] = sum;
      sum += src[row + x + r + 1] - src[row + x - r];
    }
    for (; x < w; x++) {
      dst[row + x] = sum;
      if (x - r >= 0) sum -= src[row + x - r];
      if (x + r + 1 < w) sum += src[row + x + r + 1];
    }
  }
  return dst;
}

function addRow(colSum: Float64Array, rows: Float32Array, start: number, sign: number): void {
  for (let x = 0; x < colSum.length; x++) colSum[x] += sign * rows[start + x];
}

/** Moves the column sums' window from row y to row y + 1. */
function slideColumns(colSum: Float64Array, rows: Float32Array, w: number, h: number, r: number, y: number): void {
  const add = y + r + 1 < h ? (y + r + 1) * w : -1;
  const drop = y - r >= 0 ? (y - r) * w : -1;
  if (add >= 0 && drop >= 0) for (let x = 0; x < w; x++) colSum[x] += rows[add + x] - rows[drop + x];
  else if (add >= 0) addRow(colSum, rows, add, 1);
  else if (drop >= 0) addRow(colSum, rows, drop, -1);
}

/** Luma (0..1) of interleaved 8-bit RGB. */
export function lumaOf(rgb: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0, j = 0; i < n; i++, j += 3) out[i] = (0.299 * rgb[j] + 0.587 * rgb[j + 1] + 0.114 * rgb[j + 2]) / 255;
  return out;
}

export interface GuidedCoefficients { a: Float32Array; b: Float32Array; width: number; height: number }

/**
 * Fits q = a*I + b in every (2r+1)^2 window of the low-resolution guide I and matte p (both 0..1),
 * and returns the window-averaged coefficients. eps is the regulariser: larger keeps more of p.
 */
export function guidedCoefficients(guide: Float32Array, matte: Float32Array, w: number, h: number, r: number, eps: number): GuidedCoefficients {
  const n = w * h;
  // The four window means (I, p, I*p, I*I) share one vertical pass that writes a and b directly:
  // half the memory traffic of four separate box means.
  const sumI = rowWindowSums(guide, w, h, r, new Float32Array(n));
  const sumP = rowWindowSums(matte, w, h, r, new Float32Array(n));
  const prod = new Float32Array(n);
  for (let i = 0; i < n; i++) prod[i] = guide[i] * matte[i];
  const sumIP = rowWindowSums(prod, w, h, r, new Float32Array(n));
  for (let i = 0; i < n; i++) prod[i] = guide[i] * guide[i];
  const sumII = rowWindowSums(prod, w, h, r, new Float32Array(n));
  const a = prod; // reused: prod is no longer needed
  const b = new Float32Array(n);
  const invX = windowInverses(w, r);
  const cI = new Float64Array(w), cP = new Float64Array(w), cIP = new Float64Array(w), cII = new Float64Array(w);
  for (let y = 0; y <= Math.min(r, h - 1); y++) {
    const row = y * w;
    addRow(cI, sumI, row, 1); addRow(cP, sumP, row, 1); addRow(cIP, sumIP, row, 1); addRow(cII, sumII, row, 1);
  }
  for (let y = 0; y < h; y++) {
    const invY = 1 / (Math.min(h - 1, y + r) - Math.max(0, y - r) + 1);
    const row = y * w;
    for (let x = 0; x < w; x++) {
      const inv = invX[x] * invY;
      const mI = cI[x] * inv, mP = cP[x] * inv;
      const varI = cII[x] * inv - mI * mI;
      const cov = cIP[x] * inv - mI * mP;
      const ax = cov / (varI + eps);
      a[row + x] = ax;
      b[row + x] = mP - ax * mI;
    }
    slideColumns(cI, sumI, w, h, r, y); slideColumns(cP, sumP, w, h, r, y);
    slideColumns(cIP, sumIP, w, h, r, y); slideColumns(cII, sumII, w, h, r, y);
  }
  return { a: boxMean(a, w, h, r, sumI), b: boxMean(b, w, h, r, sumP), width: w, height: h };
}

/**
 * The same coefficients, computed only at the pixels near uncertain ones (lo < p < 1 - lo): a
 * pixel's fit depends on the window r around it, and its averaged coefficients on the fits r
 * around that, so only the uncertain pixels dilated by r (fit) and by 2r (averaged) are
 * computed, each window summed directly. Everywhere else the matte is flat over every window and
 * the fit is a = 0, b = p rounded to 0 or 1 (to within lo). Most of a 1024x1024 grid is flat, and
 * this skips it: at 5 % uncertain pixels it is about twice as fast as running sums over the whole
 * grid, whose cost is mostly memory traffic.
 */
export function guidedCoefficientsInBand(guide: Float32Array, matte: Float32Array, w: number, h: number, r: number, eps: number, lo = 0.002): GuidedCoefficients {
  const n = w * h;
  const hi = 1 - lo;
  const uncertain = new Uint8Array(n);
  // Flat pixels snap to exactly 0 or 1 (a change below lo): long runs of one level, which
  // applyGuided fills without computing.
  const a = new Float32Array(n);
  const b = new Float32Array(n);
  let any = false;
  for (let i = 0; i < n; i++) {
    const v = matte[i];
    if (v <= lo) continue;
    if (v >= hi) b[i] = 1;
    else { b[i] = v; uncertain[i] = 1; any = true; }
  }
  if (!any) return { a, b, width: w, height: h };
  const fitted = dilate(uncertain, w, h, r);
  const averaged = dilate(fitted, w, h, r);
  // Per-pixel fits; a = 0, b = p where nothing is uncertain within reach.
  const fa = new Float32Array(n);
  const fb = Float32Array.from(b);
  for (let y = 0; y < h; y++) {
    const y0 = Math.max(0, y - r), y1 = Math.min(h - 1, y + r);
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      if (!fitted[i]) continue;
      const x0 = Math.max(0, x - r), x1 = Math.min(w - 1, x + r);
      let sI = 0, sP = 0, sIP = 0, sII = 0;
      for (let yy = y0; yy <= y1; yy++) {
        for (let j = yy * w + x0, end = yy * w + x1; j <= end; j++) {
          const I = guide[j], P = matte[j];
          sI += I; sP += P; sIP += I * P; sII += I * I;
        }
      }
      const inv = 1 / ((y1 - y0 + 1) * (x1 - x0 + 1));
      const mI = sI * inv, mP = sP * inv;
      const ax = (sIP * inv - mI * mP) / (sII * inv - mI * mI + eps);
      fa[i] = ax;
      fb[i] = mP - ax * mI;
    }
  }
  for (let y = 0; y < h; y++) {
    const y0 = Math.max(0, y - r), y1 = Math.min(h - 1, y + r);
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      if (!averaged[i]) continue;
      const x0 = Math.max(0, x - r), x1 = Math.min(w - 1, x + r);
      let sa = 0, sb = 0;
      for (let yy = y0; yy <= y1; yy++) {
        for (let j = yy * w + x0, end = yy * w + x1; j <= end; j++) { sa += fa[j]; sb += fb[j]; }
      }
      const inv = 1 / ((y1 - y0 + 1) * (x1 - x0 + 1));
      a[i] = sa * inv;
      b[i] = sb * inv;
    }
  }
  return { a, b, width: w, height: h };
}

/**
 * Binary dilation of a 0/1 mask by a (2r+1)x(2r+1) square: 1 where any pixel of the window is
 * set. Rows first, then columns as an OR of the 2r+1 neighbouring rows; both four bytes at a
 * time when rows are whole 32-bit words (the model's grid is 1024 wide). It runs twice per image
 * on that grid, where byte-wise passes cost 13 ms and word-wise ones about 3.
 */
export function dilate(mask: Uint8Array, w: number, h: number, r: number): Uint8Array {
  const wordRows = w % 4 === 0 && mask.byteOffset % 4 === 0;
  const rows = wordRows && r <= 4 && LITTLE_ENDIAN ? dilateRowsByWords(mask, w, h, r) : dilateRows(mask, w, h, r);
  const out = new Uint8Array(w * h);
  const stride = wordRows ? w >> 2 : w;
  const src = wordRows ? new Uint32Array(rows.buffer) : rows;
  const dst = wordRows ? new Uint32Array(out.buffer) : out;
  for (let y = 0; y < h; y++) {
    const o = y * stride;
    for (let k = Math.max(0, y - r), last = Math.min(h - 1, y + r); k <= last; k++) {
      const s = k * stride;
      for (let x = 0; x < stride; x++) dst[o + x] |= src[s + x];
    }
  }
  return out;
}

/** The byte shifts of dilateRowsByWords take the next pixel to be the next byte up in a word. */
const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** Row pass of `dilate`: a running count of set pixels in each row's window. */
function dilateRows(mask: Uint8Array, w: number, h: number, r: number): Uint8Array {
  const rows = new Uint8Array(w * h);
  for (let y = 0; y < h; y++) {
    const row = y * w;
    let count = 0;
    for (let x = 0; x < Math.min(r, w); x++) count += mask[row + x];
    for (let x = 0; x < w; x++) {
      if (x + r < w) count += mask[row + x + r];
      if (x - r - 1 >= 0) count -= mask[row + x - r - 1];
      rows[row + x] = count > 0 ? 1 : 0;
    }
  }
  return rows;
}

/**
 * Row pass of `dilate` on 32-bit words (rows of whole words): r steps of one pixel, each an OR of
 * the word with itself shifted a byte either way, plus the byte carried from the neighbouring
 * word of the same row (little-endian: the next pixel is the next byte up).
 */
function dilateRowsByWords(mask: Uint8Array, w: number, h: number, r: number): Uint8Array {
  const stride = w >> 2;
  let cur = new Uint32Array(mask.buffer, mask.byteOffset, stride * h);
  for (let step = 0; step < r; step++) {
    const next = new Uint32Array(stride * h);
    for (let y = 0; y < h; y++) {
      const row = y * stride;
      for (let x = 0; x < stride; x++) {
        const v = cur[row + x];
        let o = v | (v << 8) | (v >>> 8);
        if (x > 0) o |= cur[row + x - 1] >>> 24;
        if (x + 1 < stride) o |= cur[row + x + 1] << 24;
        next[row + x] = o;
      }
    }
    cur = next;
  }
  return r === 0 ? Uint8Array.from(mask) : new Uint8Array(cur.buffer);
}

/**
 * Applies low-resolution guided coefficients at full resolution: q = A(x,y) * luma(x,y) + B(x,y),
 * with A and B bilinearly upsampled. `rgb` is the full-resolution image (interleaved 8-bit RGB,
 * W x H). Returns the 8-bit matte.
 * Between two grid cells where a = 0 and b rounds to the same level on both source rows, every
 * output pixel is that level whatever the photo. Such spans (most of a photo, away from the
 * subject's edge) are found per source row pair on the grid, and filled without interpolating
 * or reading the pixels; A and B are interpolated only in the other spans.
 */
export function applyGuided(coef: GuidedCoefficients, rgb: Uint8Array, W: number, H: number): Uint8Array {
  const { a, b, width: lw, height: lh } = coef;
  const xs = axisTable(lw, W);
  const ys = axisTable(lh, H);
  const out = new Uint8Array(W * H);
  // Output columns [colStart[c], colStart[c + 1]) interpolate between grid cells c and c + 1.
  const colStart = new Int32Array(lw + 1);
  for (let c = 0, x = 0; c <= lw; c++) {
    while (x < W && xs.i0[x] < c) x++;
    colStart[c] = x;
  }
  const level = (v: number) => (v <= 0 ? 0 : v >= 1 ? 255 : (v * 255 + 0.5) | 0);
  const cellLevel = new Int16Array(lw);
  const spanStart = new Int32Array(lw + 1), spanLevel = new Int16Array(lw);
  const rowA0 = new Float32Array(W), rowA1 = new Float32Array(W), rowB0 = new Float32Array(W), rowB1 = new Float32Array(W);
  const k0 = 0.299, k1 = 0.587, k2 = 0.114;
  let spans = 0;
  let pair0 = -1, pair1 = -1;
  for (let y = 0; y < H; y++) {
    const s0 = ys.i0[y], s1 = ys.i1[y], fy = ys.f[y];
    if (s0 !== pair0 || s1 !== pair1) {
      pair0 = s0; pair1 = s1;
      const r0 = s0 * lw, r1 = s1 * lw;
      for (let c = 0; c < lw; c++) {
        const l = level(b[r0 + c]);
        cellLevel[c] = a[r0 + c] === 0 && a[r1 + c] === 0 && l === level(b[r1 + c]) ? l : -1;
      }
      // Spans of equal level (or of "compute"), merged over neighbouring cells.
      spans = 0;
      for (let c = 0; c < lw; c++) {
        const next = c + 1 < lw ? cellLevel[c + 1] : cellLevel[c];
        const l = cellLevel[c] === next ? cellLevel[c] : -1;
        if (colStart[c] === colStart[c + 1]) continue;
        if (spans > 0 && spanLevel[spans - 1] === l) continue;
        spanStart[spans] = colStart[c];
        spanLevel[spans++] = l;
      }
      spanStart[spans] = W;
      for (let sp = 0; sp < spans; sp++) {
        if (spanLevel[sp] >= 0) continue;
        for (let x = spanStart[sp]; x < spanStart[sp + 1]; x++) {
          const i = xs.i0[x], j = xs.i1[x], f = xs.f[x];
          rowA0[x] = a[r0 + i] + (a[r0 + j] - a[r0 + i]) * f;
          rowB0[x] = b[r0 + i] + (b[r0 + j] - b[r0 + i]) * f;
          rowA1[x] = a[r1 + i] + (a[r1 + j] - a[r1 + i]) * f;
          rowB1[x] = b[r1 + i] + (b[r1 + j] - b[r1 + i]) * f;
        }
      }
    }
    const o = y * W;
    for (let sp = 0; sp < spans; sp++) {
      const start = spanStart[sp], end = spanStart[sp + 1], l = spanLevel[sp];
      if (l >= 0) {
        out.fill(l, o + start, o + end);
        continue;
      }
      for (let x = start, j = (o + start) * 3; x < end; x++, j += 3) {
        const A = rowA0[x] + (rowA1[x] - rowA0[x]) * fy;
        const B = rowB0[x] + (rowB1[x] - rowB0[x]) * fy;
        // luma in 0..255, so q*255 = A*luma + B*255
        const q = A * (k0 * rgb[j] + k1 * rgb[j + 1] + k2 * rgb[j + 2]) + B * 255;
        out[o + x] = q <= 0 ? 0 : q >= 255 ? 255 : q + 0.5;
      }
    }
  }
  return out;
}

/** Everything at or above 128 becomes opaque, the rest transparent. */
export function hardenMatte(alpha: Uint8Array, threshold = 128): Uint8Array {
  const out = new Uint8Array(alpha.length);
  for (let i = 0; i < alpha.length; i++) out[i] = alpha[i] >= threshold ? 255 : 0;
  return out;
}
