import t from 'tap';
import { applyGuided, boxMean, dilate, guidedCoefficients, guidedCoefficientsInBand, hardenMatte, lumaOf } from '../src/pipeline/refine.js';
import { blurFusion, decontaminate } from '../src/pipeline/foreground.js';

const close = (a: ArrayLike<number>, b: number[], tol = 1e-5) => Array.from(a).every((v, i) => Math.abs(v - b[i]) <= tol);

t.test('boxMean averages the clamped window', async (t) => {
  // 3x3, radius 1: the centre sees all nine, a corner sees four.
  const src = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const out = boxMean(src, 3, 3, 1);
  t.ok(Math.abs(out[4] - 5) < 1e-6, 'centre');
  t.ok(Math.abs(out[0] - (1 + 2 + 4 + 5) / 4) < 1e-6, 'corner');
  t.ok(Math.abs(out[1] - (1 + 2 + 3 + 4 + 5 + 6) / 6) < 1e-6, 'edge');
  // radius larger than the image: every pixel is the global mean
  t.ok(close(boxMean(src, 3, 3, 10), Array(9).fill(5)), 'huge radius');
  // radius 0 is the identity
  t.ok(close(boxMean(src, 3, 3, 0), Array.from(src)), 'radius 0');
  // a 1-pixel-high strip
  t.ok(close(boxMean(new Float32Array([0, 3, 6]), 3, 1, 1), [1.5, 3, 4.5]));
});

t.test('guided coefficients reproduce a matte that is a linear function of the guide', async (t) => {
  // p = 0.5 * I + 0.1 everywhere: the fit recovers a = 0.5, b = 0.1 (eps tiny).
  const w = 5, h = 4;
  const I = new Float32Array(w * h).map((_, i) => (i % 7) / 7);
  const p = I.map((v) => 0.5 * v + 0.1);
  const c = guidedCoefficients(I, p, w, h, 1, 1e-8);
  t.ok(Array.from(c.a).every((v) => Math.abs(v - 0.5) < 1e-3), 'a');
  t.ok(Array.from(c.b).every((v) => Math.abs(v - 0.1) < 1e-3), 'b');
});

t.test('guided coefficients keep a flat matte flat whatever the guide', async (t) => {
  const w = 4, h = 4;
  const I = new Float32Array(w * h).map((_, i) => (i * 37) % 11 / 11);
  const p = new Float32Array(w * h).fill(1);
  const c = guidedCoefficients(I, p, w, h, 1, 1e-3);
  t.ok(Array.from(c.a).every((v) => Math.abs(v) < 1e-5));
  t.ok(Array.from(c.b).every((v) => Math.abs(v - 1) < 1e-5));
});

t.test('applyGuided follows the full-resolution edge, where bilinear would blur it', async (t) => {
  // Low-res grid 2x1 with a = 1, b = 0 (matte = luma): the output follows a sharp edge in the
  // full-resolution guide (black | white at x = 2 of 4) exactly.
  const coef = { a: new Float32Array([1, 1]), b: new Float32Array([0, 0]), width: 2, height: 1 };
  const rgb = new Uint8Array([0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255]);
  t.same(Array.from(applyGuided(coef, rgb, 4, 1)), [0, 0, 255, 255]);
  // b alone, interpolated: a = 0, b goes 0 -> 1 across the grid.
  const ramp = { a: new Float32Array([0, 0]), b: new Float32Array([0, 1]), width: 2, height: 1 };
  t.same(Array.from(applyGuided(ramp, rgb, 4, 1)), [0, 64, 191, 255]);
});

t.test('lumaOf and hardenMatte', async (t) => {
  t.ok(close(lumaOf(new Uint8Array([255, 255, 255, 255, 0, 0]), 2), [1, 0.299], 1e-6));
  t.same(Array.from(hardenMatte(new Uint8Array([0, 127, 128, 255]))), [0, 0, 255, 255]);
});

t.test('decontamination removes the old background from soft-edge colours', async (t) => {
  // A red subject (255,0,0) over a green background (0,255,0) on a 1x20 strip: 8 opaque pixels,
  // a soft edge of alpha .8 .6 .4 .2, then 8 transparent. Observed colours are the true blend;
  // after two blur-fusion passes (wide, then narrow, as the pipeline does) at least three quarters
  // of the green is gone from every soft pixel (the method is approximate, not exact).
  const alphaBytes = new Uint8Array([...Array(8).fill(255), 204, 153, 102, 51, ...Array(8).fill(0)]);
  const n = alphaBytes.length;
  const rgb = new Uint8Array(n * 3);
  alphaBytes.forEach((a, i) => { rgb[i * 3] = Math.round(a); rgb[i * 3 + 1] = 255 - Math.round(a); });
  const alpha = Float32Array.from(alphaBytes, (a) => a / 255);
  let est = blurFusion(rgb, alpha, n, 1, 6);
  est = blurFusion(rgb, alpha, n, 1, 1, est.F, est.B);
  const fixed = Uint8Array.from(rgb);
  decontaminate(fixed, alphaBytes, n, 1, { ...est, width: n, height: 1 });
  for (const i of [8, 9, 10, 11]) {
    t.ok(fixed[i * 3 + 1] <= 0.25 * rgb[i * 3 + 1] && fixed[i * 3] >= 205, `pixel ${i}: (${rgb[i * 3]},${rgb[i * 3 + 1]}) -> (${fixed[i * 3]},${fixed[i * 3 + 1]})`);
  }
  t.same(Array.from(fixed.subarray(0, 3)), [255, 0, 0], 'opaque pixel untouched');
  t.same(Array.from(fixed.subarray(57, 60)), [0, 255, 0], 'transparent pixel untouched');
});

t.test('boxMean equals the brute-force window mean for many shapes and radii', async (t) => {
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  for (const [w, h, r] of [[7, 5, 1], [13, 9, 3], [4, 20, 6], [1, 1, 2], [30, 2, 0], [9, 9, 12], [8, 8, 3], [2, 17, 1]]) {
    const src = new Float32Array(w * h).map(() => rand());
    const out = boxMean(src, w, h, r);
    let maxErr = 0;
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
      let sum = 0, n = 0;
      for (let yy = Math.max(0, y - r); yy <= Math.min(h - 1, y + r); yy++) for (let xx = Math.max(0, x - r); xx <= Math.min(w - 1, x + r); xx++) { sum += src[yy * w + xx]; n++; }
      maxErr = Math.max(maxErr, Math.abs(sum / n - out[y * w + x]));
    }
    t.ok(maxErr < 1e-5, `${w}x${h} r=${r}: max error ${maxErr.toExponential(1)}`);
  }
});

t.test('guidedCoefficientsInBand matches the full fit, computing only around the uncertain band', async (t) => {
  // 40x30 grid: a flat matte (0 left, 1 right) with a soft vertical edge at x = 20..22,
  // computed in 8x8 tiles (so that tiles are skipped, others computed with their margins).
  const w = 40, h = 30;
  const guide = new Float32Array(w * h).map((_, i) => ((i * 13) % 17) / 17);
  const matte = new Float32Array(w * h).map((_, i) => { const x = i % w; return x < 20 ? 0 : x > 22 ? 1 : (x - 19) / 4; });
  const full = guidedCoefficients(guide, matte, w, h, 1, 1e-4);
  const band = guidedCoefficientsInBand(guide, matte, w, h, 1, 1e-4, 0.002);
  let maxA = 0, maxB = 0;
  for (let i = 0; i < w * h; i++) { maxA = Math.max(maxA, Math.abs(full.a[i] - band.a[i])); maxB = Math.max(maxB, Math.abs(full.b[i] - band.b[i])); }
  t.ok(maxA < 1e-5 && maxB < 1e-5, `same coefficients (max diff a ${maxA.toExponential(1)}, b ${maxB.toExponential(1)})`);
  // A soft disc crosses tile borders in every direction; radius 2 widens the margins.
  const dw = 50, dh = 45;
  const dGuide = new Float32Array(dw * dh).map((_, i) => ((i * 29) % 23) / 23);
  const disc = new Float32Array(dw * dh).map((_, i) => {
    const d = Math.hypot((i % dw) - 24, Math.floor(i / dw) - 21);
    return Math.min(1, Math.max(0, (14 - d) / 3));
  });
  for (const r of [1, 2]) {
    const f = guidedCoefficients(dGuide, disc, dw, dh, r, 1e-3);
    const g = guidedCoefficientsInBand(dGuide, disc, dw, dh, r, 1e-3, 0.002);
    let m = 0;
    for (let i = 0; i < dw * dh; i++) m = Math.max(m, Math.abs(f.a[i] - g.a[i]), Math.abs(f.b[i] - g.b[i]));
    t.ok(m < 1e-5, `disc, r=${r}: max diff ${m.toExponential(1)}`);
  }
  const flat = guidedCoefficientsInBand(guide, new Float32Array(w * h).fill(1), w, h, 1, 1e-4);
  t.ok(flat.a.every((v) => v === 0) && flat.b.every((v) => v === 1), 'a flat matte needs no fit');
});

t.test('applyGuided equals the per-pixel formula where flat spans are filled and edges computed', async (t) => {
  // A 6x5 grid: a = 0 and b flat (0 or 1) in most cells, a slope and a soft b in a few, upsampled
  // to 23x17 (neither a multiple of the grid) over a noisy photo.
  const lw = 6, lh = 5, W = 23, H = 17;
  const a = new Float32Array(lw * lh);
  const b = new Float32Array(lw * lh).map((_, i) => (i % lw >= 3 ? 1 : 0));
  a[2 * lw + 2] = 0.7; b[2 * lw + 2] = -0.1;
  a[3 * lw + 3] = -0.4; b[3 * lw + 3] = 0.8;
  b[4 * lw + 4] = 0.5;
  b[lw + 1] = 0.001; // rounds to level 0: still a flat span
  const rgb = new Uint8Array(W * H * 3).map((_, i) => (i * 97 + 13) % 256);
  const out = applyGuided({ a, b, width: lw, height: lh }, rgb, W, H);
  const axis = (src: number, dst: number, x: number) => {
    const pos = Math.min(Math.max((x + 0.5) * (src / dst) - 0.5, 0), src - 1);
    const i = Math.floor(pos);
    return { i, j: Math.min(i + 1, src - 1), f: pos - i };
  };
  let worst = 0;
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) {
    const X = axis(lw, W, x), Y = axis(lh, H, y);
    const at = (arr: Float32Array) => {
      const r0 = arr[Y.i * lw + X.i] + (arr[Y.i * lw + X.j] - arr[Y.i * lw + X.i]) * X.f;
      const r1 = arr[Y.j * lw + X.i] + (arr[Y.j * lw + X.j] - arr[Y.j * lw + X.i]) * X.f;
      return r0 + (r1 - r0) * Y.f;
    };
    const k = (y * W + x) * 3;
    const q = at(a) * (0.299 * rgb[k] + 0.587 * rgb[k + 1] + 0.114 * rgb[k + 2]) + at(b) * 255;
    const want = Math.min(255, Math.max(0, Math.round(q)));
    worst = Math.max(worst, Math.abs(want - out[y * W + x]));
  }
  t.ok(worst <= 1, `within one level of the formula everywhere (worst ${worst})`);
  t.ok(out.includes(0) && out.includes(255) && out.some((v) => v > 0 && v < 255), 'flat and computed pixels both present');
});

t.test('dilate grows a mask by a square window, clamped at the borders', async (t) => {
  const m = new Uint8Array(7 * 5);
  m[2 * 7 + 3] = 1;
  const d1 = dilate(m, 7, 5, 1);
  const set = (d: Uint8Array) => Array.from(d).flatMap((v, i) => (v ? [[i % 7, Math.floor(i / 7)]] : []));
  t.same(set(d1), [[2, 1], [3, 1], [4, 1], [2, 2], [3, 2], [4, 2], [2, 3], [3, 3], [4, 3]]);
  const corner = new Uint8Array(7 * 5);
  corner[0] = 1;
  t.same(set(dilate(corner, 7, 5, 2)), [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1], [0, 2], [1, 2], [2, 2]]);
  t.same(Array.from(dilate(m, 7, 5, 0)), Array.from(m), 'radius 0 is the mask itself');
  t.ok(dilate(new Uint8Array(35), 7, 5, 3).every((v) => v === 0), 'an empty mask stays empty');
});

t.test('dilate equals a direct window search on random masks, word-wide rows or not', async (t) => {
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  for (const [w, h] of [[16, 9], [13, 11], [4, 1], [1, 6], [32, 32]]) {
    for (const r of [0, 1, 2, 5]) {
      const m = Uint8Array.from({ length: w * h }, () => (rand() < 0.08 ? 1 : 0));
      const want = new Uint8Array(w * h);
      for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) {
        for (let yy = Math.max(0, y - r); yy <= Math.min(h - 1, y + r); yy++)
          for (let xx = Math.max(0, x - r); xx <= Math.min(w - 1, x + r); xx++) if (m[yy * w + xx]) want[y * w + x] = 1;
      }
      t.same(Array.from(dilate(m, w, h, r)), Array.from(want), `${w}x${h} r=${r}`);
    }
  }
});
