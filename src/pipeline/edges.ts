/**
 * The matte stage between the model and the compositor: subject check on the raw output, the
 * matte's clean-up on the model's grid, the matte brought to output resolution (guided by the photo, or plain bilinear), an optional hard
 * threshold, and the decontaminated foreground colours.
 */
import { CutoutError } from '../errors.js';
import { hasSubject, outputToMatte, resizeBilinear, resizeNearest } from './matte.js';
import { applyGuided, guidedCoefficientsInBand, hardenMatte, lumaOf } from './refine.js';
import { blurFusion, decontaminate } from './foreground.js';
import { clearHaze, dropSmallComponents } from './cleanup.js';

/**
 * Refinement settings, chosen on the aggregate of the public composite set (never on single
 * images): the clean-up of the model's matte, radius and eps of the guided filter on the model's
 * grid, and the working size and radii of the foreground estimation.
 */
export const EDGE_PARAMS: Readonly<EdgeParams> = Object.freeze({
  /**
   * ISNet leaves a faint haze (a few percent) on backgrounds: below this level the matte is
   * cleared, and up to 0.5 it is rescaled (cleanup.ts, clearHaze). 0.2 measured a little better
   * (MAE 0.0244 against 0.0249); the lower value clears less of a true faint edge. Stretching the
   * top end as well (0.9 to 1) lowered MAE less and made opaque pixels of soft edges, which
   * decontamination then leaves untouched.
   */
  hazeFloor: 0.1,
  /**
   * Components of the matte (above the haze floor) lighter than this share of the largest are
   * cleared: specks on the background. 0.05 to 0.2 measured the same; the low end keeps a small
   * second subject.
   */
  minComponentShare: 0.05,
  guidedRadius: 1,
  guidedEps: 1e-4,
  /**
   * Longest side of the grid where foreground/background colours are estimated. 256 gives the
   * same edge colours as 512 with the radius scaled (soft-edge colour error within 1 % on the
   * three fixtures) at a quarter of the work.
   */
  fusionSide: 256,
  /**
   * Blur-fusion radii on that grid, in its pixels (an eighth of the side). One wide pass: a
   * second, narrow pass (as in Forte & Pitie) follows the predicted matte's errors too closely
   * and measured worse here.
   */
  fusionRadii: Object.freeze([32]),
});

export interface EdgeParams {
  hazeFloor: number;
  minComponentShare: number;
  guidedRadius: number;
  guidedEps: number;
  fusionSide: number;
  fusionRadii: readonly number[];
}

/** EDGE_PARAMS with a request's overrides (benchmarks that compare settings: bench:quality --edge-params). */
export function edgeParamsOf(overrides?: Partial<EdgeParams>): Readonly<EdgeParams> {
  return overrides ? { ...EDGE_PARAMS, ...overrides } : EDGE_PARAMS;
}

export interface MatteOptions {
  /** Guided upsampling (default on). */
  refine?: boolean;
  /** `hard` thresholds the matte at 50 %. */
  alpha?: 'soft' | 'hard';
  /** Overrides of EDGE_PARAMS (benchmarks). */
  edgeParams?: Partial<EdgeParams>;
}

/**
 * The model's output on its grid, in 0..1 and cleaned (specks and haze). Throws
 * no_subject_detected, decided on the raw output before any clean-up.
 */
export function cleanGridMatte(output: Float32Array, range: readonly [number, number], grid: { width: number; height: number }, params: Readonly<EdgeParams> = EDGE_PARAMS): Float32Array {
  if (!hasSubject(output, range)) throw new CutoutError('no_subject_detected');
  const n = grid.width * grid.height;
  const lo = range[0], span = range[1] - range[0];
  const p = new Float32Array(n);
  for (let i = 0; i < n; i++) p[i] = Math.min(1, Math.max(0, (output[i] - lo) / span));
  dropSmallComponents(p, grid.width, grid.height, params.minComponentShare, params.hazeFloor);
  clearHaze(p, params.hazeFloor);
  return p;
}

/** A cleaned grid matte brought to `width` x `height`, guided by `rgb` (or bilinear), hardened if asked. */
export function matteAtSize(
  p: Float32Array,
  grid: { width: number; height: number },
  modelRgb: Uint8Array,
  rgb: Uint8Array,
  width: number,
  height: number,
  opts: MatteOptions,
): Uint8Array {
  let alpha: Uint8Array;
  if (opts.refine !== false) {
    const params = edgeParamsOf(opts.edgeParams);
    const coef = guidedCoefficientsInBand(lumaOf(modelRgb, p.length), p, grid.width, grid.height, params.guidedRadius, params.guidedEps);
    alpha = applyGuided(coef, rgb, width, height);
  } else {
    alpha = resizeBilinear(outputToMatte(p), grid.width, grid.height, width, height);
  }
  return opts.alpha === 'hard' ? hardenMatte(alpha) : alpha;
}

/**
 * Replaces the colours of soft-edge pixels by estimated foreground colours (in place), computed
 * on a small grid (colours vary slowly) and sampled at full resolution.
 */
export function decontaminateEdges(rgb: Uint8Array, alpha: Uint8Array, width: number, height: number, params: Readonly<EdgeParams> = EDGE_PARAMS): void {
  let soft = false;
  for (let i = 0; i < alpha.length; i++) if (alpha[i] !== 0 && alpha[i] !== 255) { soft = true; break; }
  if (!soft) return;
  const scale = Math.min(1, params.fusionSide / Math.max(width, height));
  const w = Math.max(1, Math.round(width * scale));
  const h = Math.max(1, Math.round(height * scale));
  // Nearest samples are enough: the estimates are blurs 32 cells wide on this grid.
  const smallRgb = resizeNearest(rgb, width, height, w, h, 3);
  const small = resizeNearest(alpha, width, height, w, h, 1);
  const a = new Float32Array(w * h);
  for (let i = 0; i < a.length; i++) a[i] = small[i] / 255;
  let est = blurFusion(smallRgb, a, w, h, params.fusionRadii[0]);
  for (const r of params.fusionRadii.slice(1)) est = blurFusion(smallRgb, a, w, h, r, est.F, est.B);
  decontaminate(rgb, alpha, width, height, { ...est, width: w, height: h });
}
