/**
 * Clean-up of the model's matte on its own grid, before it is brought to full resolution:
 * the model's faint haze on the background goes to 0, and small disconnected specks are
 * removed. Both measured on the public composite set as a whole (README, Edge quality).
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

/**
 * Labels the 8-connected components of `p > threshold` and returns the label of each pixel
 * (0: below the threshold) with each component's mass (sum of p; index = label).
 */
export function labelComponents(p: Float32Array, w: number, h: number, threshold: number): { labels: Int32Array; mass: number[] } {
  const n = w * h;
  const labels = new Int32Array(n);
  const mass = [0];
  // Flood fill with an explicit stack: recursion would overflow on a large subject.
  const stack = new Int32Array(n);
  let next = 1;
  for (let seed = 0; seed < n; seed++) {
    if (labels[seed] !== 0 || !(p[seed] > threshold)) continue;
    let top = 0;
    let sum = 0;
    stack[top++] = seed;
    labels[seed] = next;
    while (top > 0) {
      const i = stack[--top];
      sum += p[i];
      const x = i % w;
      const y = (i - x) / w;
      const x0 = x > 0 ? x - 1 : x, x1 = x < w - 1 ? x + 1 : x;
      const y0 = y > 0 ? y - 1 : y, y1 = y < h - 1 ? y + 1 : y;
      for (let yy = y0; yy <= y1; yy++) {
        for (let xx = x0, j = yy * w + x0; xx <= x1; xx++, j++) {
          if (labels[j] === 0 && p[j] > threshold) {
            labels[j] = next;
            stack[top++] = j;
          }
        }
      }
    }
    mass.push(sum);
    next++;
  }
  return { labels, mass };
}

/**
 * Clears (in place) every component of `p > threshold` whose mass is below `fraction` of the
 * largest one: stray specks the model marks in the background. Its soft rim goes with it,
 * since the components are taken at a low threshold. Returns how many components were cleared.
 */
export function dropSmallComponents(p: Float32Array, w: number, h: number, fraction: number, threshold: number): number {
  if (fraction <= 0) return 0;
  const { labels, mass } = labelComponents(p, w, h, threshold);
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
  for (let i = 0; i < p.length; i++) if (drop[labels[i]] === 1) p[i] = 0;
  return dropped;
}
