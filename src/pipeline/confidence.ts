/**
 * The confidence of a cutout (cli-contract, "Confidence"): a number from 0 to 1 (1: sure) that
 * ranks cutouts by how likely they are to be wrong, read off the model's matte on its own grid
 * after the clean-up. Pure typed-array code; a few passes over the grid (about 1 M pixels).
 *
 * The signals are what the matte says of itself: how much of it is neither subject nor
 * background (soft pixels), against the subject's size and its outline; how far the subject's
 * outline moves between thresholds; how it breaks into parts; whether it touches the frame; how
 * much faint saliency the clean-up removed; and one the photo says of the matte: how alike the
 * colours of the sure subject and the sure background are. CONFIDENCE_MODEL combines them (the
 * shipped one uses two: softness and the colours' overlap) into a predicted error, fitted on the
 * public composite set with held-out folds (`npm run bench:confidence`, docs/models.md
 * "Confidence"), and maps that error to 0..1.
 */
import { labelComponents } from './cleanup.js';

/** The grid side the band's shares are given at (the model's own input, --quality best). */
const REFERENCE_SIDE = 1024;

/** What the matte says of itself, and the photo of the matte (each a plain number; docs/models.md lists them). */
export interface MatteSignals {
  /** Share of the grid with p > 0.5. */
  area: number;
  /** Mean of 2 p (1 - p): the expected absolute error of a calibrated soft matte over the whole grid. */
  softness: number;
  /** Soft pixels (0.05 < p < 0.95) per subject pixel. */
  bandPerArea: number;
  /** Soft pixels per pixel of the subject's outline: how wide its soft edge is. */
  bandPerEdge: number;
  /** 1 - IoU of p > 0.25 and p > 0.75: how far the outline moves between thresholds. */
  thresholdShift: number;
  /** Share of the subject's mass outside its largest part. */
  outsideLargest: number;
  /** Parts of p > 0.5 holding at least 1 % of the subject's mass. */
  parts: number;
  /** Share of the frame's pixels (its four edges) with p > 0.5. */
  frameTouch: number;
  /** Mean |raw - cleaned|: the faint saliency and specks the clean-up removed. */
  cleaned: number;
  /** Share of the subject's bounding box that the subject fills. */
  boxFill: number;
  /**
   * How alike the colours of the sure subject (p > 0.95) and the sure background (p < 0.05) are:
   * the Bhattacharyya coefficient of their colour histograms (16 levels a channel), 0 (no colour
   * in common) to 1 (the same colours). A subject that wears its background's colours is where
   * a salient-object model errs, whatever the matte says of itself.
   */
  colourOverlap: number;
}

/** Colour histogram bins: 16 levels in each of R, G and B. */
const COLOUR_BITS = 4;

/**
 * The Bhattacharyya coefficient of the colour histograms of the sure subject and the sure
 * background of `rgb` (interleaved, on the matte's grid); 0 when either is empty (no evidence).
 */
export function colourOverlap(p: Float32Array, rgb: Uint8Array): number {
  const shift = 8 - COLOUR_BITS;
  const bins = 1 << (3 * COLOUR_BITS);
  const subject = new Float64Array(bins), background = new Float64Array(bins);
  let nSubject = 0, nBackground = 0;
  for (let i = 0, j = 0; i < p.length; i++, j += 3) {
    const v = p[i];
    if (v > 0.05 && v < 0.95) continue;
    const bin = ((rgb[j] >> shift) << (2 * COLOUR_BITS)) | ((rgb[j + 1] >> shift) << COLOUR_BITS) | (rgb[j + 2] >> shift);
    if (v >= 0.95) { subject[bin]++; nSubject++; } else { background[bin]++; nBackground++; }
  }
  if (!nSubject || !nBackground) return 0;
  let sum = 0;
  for (let b = 0; b < bins; b++) if (subject[b] && background[b]) sum += Math.sqrt(subject[b] * background[b]);
  return sum / Math.sqrt(nSubject * nBackground);
}

/**
 * The signals of a cleaned grid matte `p` (0..1), the model's raw `output` on the same grid (in
 * the model's `range`, before the clean-up) and the grid's RGB (interleaved, what the model saw).
 */
export function matteSignals(p: Float32Array, output: Float32Array, rgb: Uint8Array, range: readonly [number, number], width: number, height: number): MatteSignals {
  const n = width * height;
  const floor = range[0], span = range[1] - range[0];
  let fg = 0, soft = 0, band = 0, lo = 0, both = 0, cleaned = 0, edge = 0;
  let minX = width, minY = height, maxX = -1, maxY = -1;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) {
      const i = row + x;
      const v = p[i];
      soft += v * (1 - v);
      cleaned += Math.abs(Math.min(1, Math.max(0, (output[i] - floor) / span)) - v);
      if (v > 0.05 && v < 0.95) band++;
      if (v > 0.25) lo++;
      if (v > 0.75) both++; // p > 0.75 implies p > 0.25: their intersection is the higher mask
      if (v > 0.5) {
        fg++;
        if (x < minX) minX = x;
        if (x > maxX) maxX = x;
        if (y < minY) minY = y;
        if (y > maxY) maxY = y;
        // An outline pixel: inside, with a 4-neighbour outside (the frame is not an outline).
        if ((x > 0 && p[i - 1] <= 0.5) || (x < width - 1 && p[i + 1] <= 0.5) || (y > 0 && p[i - width] <= 0.5) || (y < height - 1 && p[i + width] <= 0.5)) edge++;
      }
    }
  }
  let frame = 0, framePixels = 0;
  for (let x = 0; x < width; x++) {
    framePixels += 2;
    if (p[x] > 0.5) frame++;
    if (p[(height - 1) * width + x] > 0.5) frame++;
  }
  for (let y = 1; y < height - 1; y++) {
    framePixels += 2;
    if (p[y * width] > 0.5) frame++;
    if (p[y * width + width - 1] > 0.5) frame++;
  }
  const { mass } = labelComponents(p, width, height, 0.5);
  let total = 0, largest = 0, parts = 0;
  for (let l = 1; l < mass.length; l++) {
    total += mass[l];
    if (mass[l] > largest) largest = mass[l];
  }
  for (let l = 1; l < mass.length; l++) if (mass[l] >= 0.01 * total) parts++;
  const union = lo; // p > 0.75 lies inside p > 0.25
  // The soft band along an outline is a few of the grid's pixels wide whatever the grid's size, so
  // its share of the grid grows as the grid shrinks (about 2x at --quality fast's 512 against
  // best's 1024). The band's shares are brought to a 1024 grid, so that one photo gets one
  // confidence at every quality.
  const toReference = Math.sqrt(n) / REFERENCE_SIDE;
  return {
    area: fg / n,
    softness: ((2 * soft) / n) * toReference,
    bandPerArea: (band / Math.max(fg, 1)) * toReference,
    bandPerEdge: band / Math.max(edge, 1),
    thresholdShift: (union ? 1 - both / union : 1) * toReference,
    outsideLargest: total ? 1 - largest / total : 0,
    parts,
    frameTouch: frame / Math.max(framePixels, 1),
    cleaned: cleaned / n,
    boxFill: maxX >= 0 ? fg / ((maxX - minX + 1) * (maxY - minY + 1)) : 0,
    colourOverlap: colourOverlap(p, rgb),
  };
}

/** One term of the predicted error: a signal, taken as is or as its logarithm, and its weight. */
export interface ConfidenceTerm {
  signal: keyof MatteSignals;
  log: boolean;
  weight: number;
}

/**
 * The fitted combination (`npm run bench:confidence -- --fit`): the predicted log error is
 * `intercept + sum(weight * x)`, x a signal or its log (log(x + LOG_FLOOR)); the confidence is
 * 1 / (1 + exp((predicted - center) / scale)), so that it falls as the predicted error grows.
 */
export interface ConfidenceModel {
  terms: readonly ConfidenceTerm[];
  intercept: number;
  center: number;
  scale: number;
}

export const LOG_FLOOR = 1e-4;

/**
 * Fitted on the 62 cutouts of the public composite set (shared/quality/public; its 4 empty photos
 * answer no_subject_detected) by `npm run bench:confidence -- ../shared/quality/public --features
 * softness,colourOverlap --fit` on 2026-11-28: the predicted log error is softness's log (weight 1)
 * plus colourOverlap's weight picked for the ranking, then a logistic regression of "good" (IoU >=
 * 0.9) on that prediction, so that the confidence reads as the chance that the cutout is good.
 * Out of fold (5 folds, 20 shuffles) it ranks the cutouts by their real MAE with a Spearman
 * correlation of 0.813 (sd 0.009), and the 20 % least confident hold 81 % of the set's error
 * (docs/models.md, "Confidence").
 */
export const CONFIDENCE_MODEL: Readonly<ConfidenceModel> = Object.freeze<ConfidenceModel>({
  terms: [
    { signal: 'softness', log: true, weight: 1 },
    { signal: 'colourOverlap', log: false, weight: 1.65 },
  ],
  intercept: 0,
  center: -4.2159,
  scale: 0.8521,
});

/** The predicted log error of a matte with these signals. */
export function predictedLogError(signals: MatteSignals, model: Readonly<ConfidenceModel> = CONFIDENCE_MODEL): number {
  let sum = model.intercept;
  for (const term of model.terms) {
    const x = signals[term.signal];
    sum += term.weight * (term.log ? Math.log(x + LOG_FLOOR) : x);
  }
  return sum;
}

/** 0..1, 1: sure, rounded to 3 decimals (what every door shows). */
export function confidenceOf(signals: MatteSignals, model: Readonly<ConfidenceModel> = CONFIDENCE_MODEL): number {
  const c = 1 / (1 + Math.exp((predictedLogError(signals, model) - model.center) / model.scale));
  return Math.round(c * 1000) / 1000;
}
