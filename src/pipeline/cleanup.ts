/**
 * Clean-up of the model's matte on its own grid, before it is brought to full resolution:
 * the model's faint haze on the background goes to 0, and small disconnected specks are
 * removed. Both measured on the public composite set as a whole (docs/models.md, "Edge quality").
 * Pure typed-array code.
 */

/**
 * Clears the haze below `floor` (in place): [0, floor] maps to 0 and [floor, 0.5] linearly onto
 * [0, 0.5]. Values from 0.5 up are kept, so the 50 % contour (the hard matte, the subject's
 * outline) does not move and the soft colours near the opaque side stay soft.
 */
export function clearHaze(p: Float32Array, floor: number): void {
  if (floor <= 0) return;
  const scale = 0.5 / (0.5 - floor);
  for (let i = 0; i < p.length; i++) {
    const v = p[i];
    if (v < 0.5) p[i] = v <= floor ? 0 : (v - floor) * scale;
  }
}

/** Horizontal runs of `p > threshold`, row by row, with the component each belongs to. */
interface Runs {
  count: number;
  row: number[];
  start: number[];
  /** One past the run's last pixel. */
  end: number[];
  /** Component label, 1-based, in raster order of each component's first pixel. */
  label: Int32Array;
  /** Mass (sum of p) per label; index 0 unused. */
  mass: number[];
}

/**
 * Finds the 8-connected components of `p > threshold` from horizontal runs: runs of adjacent rows
 * that overlap or touch diagonally are joined (union-find). One pass over the pixels and one over
 * the runs, several times faster than a flood fill over a 1024 grid.
 */
function componentRuns(p: Float32Array, w: number, h: number, threshold: number): Runs {
  // A matte has a few thousand runs: plain arrays grow as needed.
  const row: number[] = [], start: number[] = [], end: number[] = [], runMass: number[] = [];
  const rowFirst = new Int32Array(h + 1);
  for (let y = 0; y < h; y++) {
    rowFirst[y] = row.length;
    const base = y * w;
    let x = 0;
    while (x < w) {
      if (!(p[base + x] > threshold)) {
        x++;
        continue;
      }
      const x0 = x;
      let sum = 0;
      while (x < w && p[base + x] > threshold) sum += p[base + x++];
      row.push(y);
      start.push(x0);
      end.push(x);
      runMass.push(sum);
    }
  }
  const count = row.length;
  rowFirst[h] = count;

  const parent = new Int32Array(count);
  for (let r = 0; r < count; r++) parent[r] = r;
  const find = (r: number): number => {
    while (parent[r] !== r) {
      parent[r] = parent[parent[r]];
      r = parent[r];
    }
    return r;
  };
  for (let y = 1; y < h; y++) {
    // Two pointers over this row's runs and the previous row's: 8-connected when the previous
    // run reaches from one pixel left of this run to one pixel right of it.
    let q = rowFirst[y - 1];
    const qEnd = rowFirst[y];
    for (let r = rowFirst[y]; r < rowFirst[y + 1]; r++) {
      while (q < qEnd && end[q] < start[r]) q++;
      for (let k = q; k < qEnd && start[k] <= end[r]; k++) {
        const a = find(r), b = find(k);
        // The smaller index stays root, so a label follows the component's first run.
        if (a !== b) parent[Math.max(a, b)] = Math.min(a, b);
      }
    }
  }
  const label = new Int32Array(count);
  const mass = [0];
  const labelOfRoot = new Int32Array(count);
  for (let r = 0; r < count; r++) {
    const root = find(r);
    if (labelOfRoot[root] === 0) {
      labelOfRoot[root] = mass.length;
      mass.push(0);
    }
    label[r] = labelOfRoot[root];
    mass[label[r]] += runMass[r];
  }
  return { count, row, start, end, label, mass };
}

/**
 * Labels the 8-connected components of `p > threshold` and returns the label of each pixel
 * (0: below the threshold) with each component's mass (sum of p; index = label).
 */
export function labelComponents(p: Float32Array, w: number, h: number, threshold: number): { labels: Int32Array; mass: number[] } {
  const runs = componentRuns(p, w, h, threshold);
  const labels = new Int32Array(w * h);
  for (let r = 0; r < runs.count; r++) {
    const base = runs.row[r] * w;
    labels.fill(runs.label[r], base + runs.start[r], base + runs.end[r]);
  }
  return { labels, mass: runs.mass };
}

/**
 * Clears (in place) every component of `p > threshold` whose mass is below `fraction` of the
 * largest one: stray specks the model marks in the background. Its soft rim goes with it,
 * since the components are taken at a low threshold. Returns how many components were cleared.
 */
export function dropSmallComponents(p: Float32Array, w: number, h: number, fraction: number, threshold: number): number {
  if (fraction <= 0) return 0;
  const { count, row, start, end, label, mass } = componentRuns(p, w, h, threshold);
  if (mass.length <= 2) return 0;
  let largest = 0;
  for (const m of mass) if (m > largest) largest = m;
  const drop = new Uint8Array(mass.length);
  let dropped = 0;
  for (let l = 1; l < mass.length; l++) {
    if (mass[l] < fraction * largest) {
      drop[l] = 1;
      dropped++;
    }
  }
  if (dropped === 0) return 0;
  for (let r = 0; r < count; r++) {
    if (drop[label[r]] === 1) p.fill(0, row[r] * w + start[r], row[r] * w + end[r]);
  }
  return dropped;
}
