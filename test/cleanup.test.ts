import t from 'tap';
import { clearHaze, dropSmallComponents, labelComponents } from '../src/pipeline/cleanup.js';

t.test('clearHaze zeroes the haze, rescales up to 0.5 and keeps the rest', async (t) => {
  const p = new Float32Array([0, 0.05, 0.1, 0.3, 0.5, 0.7, 0.95, 1]);
  clearHaze(p, 0.1);
  const want = [0, 0, 0, 0.25, 0.5, 0.7, 0.95, 1];
  t.ok(Array.from(p).every((v, i) => Math.abs(v - want[i]) < 1e-6), `got ${Array.from(p).join(',')}`);
  const q = new Float32Array([0.05, 0.3]);
  clearHaze(q, 0);
  t.ok(Math.abs(q[0] - 0.05) < 1e-7 && Math.abs(q[1] - 0.3) < 1e-7, 'floor 0 leaves the matte alone');
});

// 6x4 grid: a 2x2 block (mass 4 x 1.0) on the left, a diagonal pair (8-connected, mass 2 x 0.5)
// on the right, and a lone faint pixel at or below the threshold.
const W = 6, H = 4;
const grid = () => new Float32Array([
  1, 1, 0, 0, 0.5, 0,
  1, 1, 0, 0.5, 0, 0,
  0, 0, 0, 0, 0, 0,
  0, 0.08, 0, 0, 0, 0,
]);

t.test('labelComponents joins diagonal neighbours and sums each component', async (t) => {
  const { labels, mass } = labelComponents(grid(), W, H, 0.1);
  t.equal(mass.length, 3, 'background + two components (0.08 is not above the threshold)');
  t.equal(labels[0], labels[7], 'block is one component');
  t.equal(labels[4], labels[9], 'diagonal pair is one component');
  t.not(labels[0], labels[4]);
  t.equal(labels[19], 0, 'faint pixel unlabelled');
  t.same(mass.slice(1).sort(), [1, 4]);
});

t.test('dropSmallComponents clears components lighter than the share of the largest', async (t) => {
  const p = grid();
  t.equal(dropSmallComponents(p, W, H, 0.5, 0.05), 2, 'pair (1 < 2) and faint pixel (0.08 < 2) dropped');
  t.same(Array.from(p), [1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);

  const keep = grid();
  t.equal(dropSmallComponents(keep, W, H, 0.2, 0.05), 1, 'at a share of 0.2 the pair (1 >= 0.8) stays');
  t.equal(keep[4], 0.5);
  t.equal(keep[19], 0, 'faint pixel still dropped');

  const off = grid();
  t.equal(dropSmallComponents(off, W, H, 0, 0.05), 0, 'share 0 turns it off');
  t.same(off, grid());

  const single = new Float32Array([0, 1, 1, 0]);
  t.equal(dropSmallComponents(single, 2, 2, 0.5, 0.05), 0, 'one component is never dropped');
  t.same(Array.from(single), [0, 1, 1, 0]);
});

t.test('labelComponents handles a component filling the whole grid', async (t) => {
  const n = 300 * 200;
  const { labels, mass } = labelComponents(new Float32Array(n).fill(1), 300, 200, 0.5);
  t.equal(mass.length, 2);
  t.equal(mass[1], n);
  t.ok(labels.every((l) => l === 1));
});

t.test('labelComponents agrees with a plain flood fill on random grids', async (t) => {
  // A seeded generator: the same grids on every run.
  let seed = 12345;
  const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  for (let trial = 0; trial < 20; trial++) {
    const w = 5 + Math.floor(random() * 30), h = 5 + Math.floor(random() * 30);
    const density = 0.3 + random() * 0.4;
    const p = new Float32Array(w * h).map(() => (random() < density ? 0.2 + random() * 0.8 : random() * 0.1));
    const { labels, mass } = labelComponents(p, w, h, 0.15);
    // Reference: flood fill in raster order of seeds.
    const ref = new Int32Array(w * h);
    const refMass = [0];
    for (let s = 0; s < w * h; s++) {
      if (ref[s] || !(p[s] > 0.15)) continue;
      const stack = [s];
      ref[s] = refMass.length;
      let m = 0;
      while (stack.length) {
        const i = stack.pop()!;
        m += p[i];
        const x = i % w, y = (i - x) / w;
        for (let yy = Math.max(0, y - 1); yy <= Math.min(h - 1, y + 1); yy++) {
          for (let xx = Math.max(0, x - 1); xx <= Math.min(w - 1, x + 1); xx++) {
            const j = yy * w + xx;
            if (!ref[j] && p[j] > 0.15) { ref[j] = refMass.length; stack.push(j); }
          }
        }
      }
      refMass.push(m);
    }
    if (!t.same(Array.from(labels), Array.from(ref), `labels, ${w}x${h} grid ${trial}`)) break;
    t.ok(mass.length === refMass.length && mass.every((m, i) => Math.abs(m - refMass[i]) < 1e-3), `masses, grid ${trial}`);
  }
});
