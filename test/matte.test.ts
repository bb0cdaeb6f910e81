import t from 'tap';
import { boundingBox, clearTransparent, cropRaw, flattenOnto, hasSubject, outputToMatte, resizeBilinear, resizeNearest, rgbToTensor } from '../src/pipeline/matte.js';

t.test('rgbToTensor makes planar NCHW normalised by mean and std', async (t) => {
  // 2x1 image: pixel 0 = (128, 0, 255), pixel 1 = (384-256=128?..) keep values in range
  const rgb = new Uint8Array([128, 0, 255, 0, 64, 128]);
  const out = rgbToTensor(rgb, 2, 1, [128, 128, 128], [256, 256, 256]);
  t.same(Array.from(out), [0, -0.5, -0.5, -0.25, 127 / 256, 0]);
  t.throws(() => rgbToTensor(new Uint8Array(5), 2, 1, [0, 0, 0], [1, 1, 1]), RangeError);
});

t.test('hasSubject decides on the raw output, not a stretched one', async (t) => {
  const empty = new Float32Array(1000).fill(0.2);
  t.equal(hasSubject(empty), false, 'a faint uniform output is no subject');
  const one = new Float32Array(1000);
  one[5] = 0.9;
  t.equal(hasSubject(one, [0, 1], 0.001), true, 'one pixel of 1000 meets a 0.1 % bar');
  t.equal(hasSubject(one, [0, 1], 0.01), false, 'but not a 1 % bar');
});

t.test('outputToMatte clamps and rounds to 8 bits', async (t) => {
  t.same(Array.from(outputToMatte(new Float32Array([-0.5, 0, 0.5, 1, 1.7]))), [0, 0, 128, 255, 255]);
  t.same(Array.from(outputToMatte(new Float32Array([-1, 0, 1]), [-1, 1])), [0, 128, 255]);
});

t.test('boundingBox of alpha at or above the threshold', async (t) => {
  // 4x3, subject pixels at (1,0) and (2,2); a faint pixel at (3,1) stays out.
  const a = new Uint8Array([
    0, 200, 0, 0,
    0, 0, 0, 5,
    0, 0, 255, 0,
  ]);
  t.same(boundingBox(a, 4, 3, 13), { left: 1, top: 0, width: 2, height: 3 });
  t.same(boundingBox(a, 4, 3, 1), { left: 1, top: 0, width: 3, height: 3 });
  t.equal(boundingBox(new Uint8Array(12), 4, 3), null);
  t.same(boundingBox(new Uint8Array([0, 0, 0, 0, 9, 0, 0, 0, 0]), 3, 3, 1), { left: 1, top: 1, width: 1, height: 1 });
});

t.test('cropRaw copies the rows of a box', async (t) => {
  // 3x2 RGB-less two-channel image, values = index
  const data = new Uint8Array(12).map((_, i) => i);
  const out = cropRaw(data, 3, 2, { left: 1, top: 0, width: 2, height: 2 });
  t.same(Array.from(out), [2, 3, 4, 5, 8, 9, 10, 11]);
});

t.test('flattenOnto blends with the matte', async (t) => {
  const rgb = new Uint8Array([200, 100, 0, 200, 100, 0, 200, 100, 0]);
  const alpha = new Uint8Array([255, 0, 128]);
  const out = flattenOnto(rgb, alpha, { r: 0, g: 0, b: 255 });
  t.same(Array.from(out), [200, 100, 0, 0, 0, 255, 100, 50, 127]);
});

t.test('resizeBilinear interpolates between pixel centres and clamps at the edges', async (t) => {
  // 2x1 -> 4x1: centres of the source at 0.5 and 1.5 (in source pixels).
  t.same(Array.from(resizeBilinear(new Uint8Array([0, 200]), 2, 1, 4, 1)), [0, 50, 150, 200]);
  // 1x2 -> 1x4 vertically.
  t.same(Array.from(resizeBilinear(new Uint8Array([0, 200]), 1, 2, 1, 4)), [0, 50, 150, 200]);
  // 2x2 -> 4x4: the middle is the mean.
  const out = resizeBilinear(new Uint8Array([0, 100, 100, 200]), 2, 2, 4, 4);
  t.equal(out[1 * 4 + 1], 50);
  t.equal(out[2 * 4 + 2], 150);
  t.equal(out[0], 0);
  t.equal(out[15], 200);
  // Same size returns the input; downscale works too.
  const same = new Uint8Array([1, 2, 3, 4]);
  t.equal(resizeBilinear(same, 2, 2, 2, 2), same);
  t.same(Array.from(resizeBilinear(new Uint8Array([0, 0, 255, 255]), 4, 1, 2, 1)), [0, 255]);
});

t.test('resizeNearest picks the source pixel under each output centre', async (t) => {
  // 4x1 RGB-less 2-channel image -> 2x1: centres at source x = 1 and 3.
  const src = new Uint8Array([0, 1, 10, 11, 20, 21, 30, 31]);
  t.same(Array.from(resizeNearest(src, 4, 1, 2, 1, 2)), [10, 11, 30, 31]);
  t.same(Array.from(resizeNearest(new Uint8Array([5, 6]), 1, 2, 1, 4, 1)), [5, 5, 6, 6]);
  const same = new Uint8Array([1, 2]);
  t.equal(resizeNearest(same, 2, 1, 2, 1, 1), same);
});

t.test('clearTransparent blacks out only fully transparent pixels', async (t) => {
  const rgb = new Uint8Array([9, 8, 7, 6, 5, 4, 3, 2, 1, 10, 11, 12, 13, 14, 15]);
  clearTransparent(rgb, new Uint8Array([0, 1, 0, 0, 255]));
  t.same(Array.from(rgb), [0, 0, 0, 6, 5, 4, 0, 0, 0, 0, 0, 0, 13, 14, 15]);
});

t.test('clearTransparent matches a pixel-by-pixel reference on long mixed runs, aligned or not', async (t) => {
  // A seeded generator: runs of 0, 255 and soft values, 1 to 40 pixels long, so that transparent
  // runs start and end at every position within a 32-bit word.
  let seed = 99;
  const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  for (const offset of [0, 1, 3]) {
    const n = 4001;
    const backing = new Uint8Array(n + offset);
    const alpha = backing.subarray(offset);
    for (let i = 0; i < n; ) {
      const len = 1 + Math.floor(random() * 40);
      const kind = random();
      const v = kind < 0.45 ? 0 : kind < 0.9 ? 255 : 1 + Math.floor(random() * 254);
      alpha.fill(v, i, Math.min(n, i + len));
      i += len;
    }
    const rgb = Uint8Array.from({ length: n * 3 }, (_, i) => 1 + (i % 250));
    const expected = Uint8Array.from(rgb);
    for (let i = 0; i < n; i++) if (alpha[i] === 0) expected.fill(0, i * 3, i * 3 + 3);
    clearTransparent(rgb, alpha);
    t.same(Buffer.from(rgb).equals(Buffer.from(expected)), true, `byte offset ${offset}`);
  }
});
