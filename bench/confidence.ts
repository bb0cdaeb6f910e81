/**
 * `npm run bench:confidence -- <corpus-dir> [--dataset FILE] [--features a,b] [--fit] [--method rank|ridge] [--folds K] [--repeats R]`
 *
 * How well the confidence ranks cutouts by their real error, on a corpus laid out like
 * shared/quality/public (images/, alpha/, manifest.json; the ground truth is read here, so no
 * evaluator is needed). Runs the pipeline at full size on every image (the default request of the
 * CLI), keeps each cutout's matte signals, its confidence and its real MAE and IoU against the
 * ground truth, then reports:
 *   - for the shipped CONFIDENCE_MODEL and for single signals: the Spearman correlation of
 *     (1 - confidence) with MAE, the share of the set's total error held by the 20 % least
 *     confident, and the share of the bad cutouts (IoU < 0.9) among them;
 *   - for the fitting procedures, the same figures out of fold: K folds, R times over with other
 *     shuffles (seeded), each image scored only by a model that never saw it. The rank fit (the
 *     shipped one: softness's log, weight 1, and each other chosen signal's weight picked for the
 *     ranking) and the ridge regression of log MAE on the chosen signals and on all of them;
 *   - the cost: the signals' time against the removal's, as a ratio from this run.
 * `--features a,b` chooses the signals (softness first; the shipped model's by default), `--fit`
 * prints the model fitted on every image by the rank fit (`--method ridge`: the ridge), to paste
 * into CONFIDENCE_MODEL. `--dataset FILE`
 * reads the per-image rows from FILE when it exists (no model run) and writes them there otherwise.
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { createPipeline } from '../dist/pipeline/index.js';
import type { RemoveRequest } from '../dist/pipeline/types.js';
import { CutoutError } from '../dist/errors.js';
import { CONFIDENCE_MODEL, LOG_FLOOR, confidenceOf, predictedLogError, type ConfidenceModel, type MatteSignals } from '../dist/pipeline/confidence.js';
import { option } from './common.js';

const args = process.argv.slice(2);
const VALUED = new Set(['--dataset', '--folds', '--repeats', '--lambda', '--features', '--quality', '--method']);
const corpus = args.find((a, i) => !a.startsWith('--') && !VALUED.has(args[i - 1] ?? ''));
if (!corpus) {
  process.stderr.write('usage: npm run bench:confidence -- <corpus-dir> [--dataset FILE] [--fit] [--folds K] [--repeats R]\n');
  process.exit(2);
}

interface Row {
  id: string;
  signals: MatteSignals;
  confidence: number;
  mae: number;
  iou: number;
  ms: number;
  signalMs: number;
  /** --second-look: mean |a - b| of the matte and that of a --quality fast pass, and that pass's model time. */
  secondLook?: { disagreement: number; inferenceMs: number; flipDisagreement?: number };
}

/** MAE over all pixels and IoU of the p > 0.5 masks, of a 1-channel matte against the ground truth. */
async function errorOf(matte: Buffer, gtFile: string, width: number, height: number): Promise<{ mae: number; iou: number }> {
  const gt = await sharp(gtFile).extractChannel(0).resize(width, height, { fit: 'fill' }).raw().toBuffer();
  let abs = 0, inter = 0, union = 0;
  for (let i = 0; i < gt.length; i++) {
    abs += Math.abs(matte[i] - gt[i]);
    const a = matte[i] > 127, b = gt[i] > 127;
    if (a && b) inter++;
    if (a || b) union++;
  }
  return { mae: abs / gt.length / 255, iou: union ? inter / union : 1 };
}

/** A cheap second look tried for the confidence: the same image at --quality fast, and mirrored. */
async function secondLook(pipeline: ReturnType<typeof createPipeline>, bytes: Buffer, request: RemoveRequest, matte: Buffer): Promise<Row['secondLook']> {
  const meanDiff = (a: Buffer, b: Buffer) => {
    let d = 0;
    for (let i = 0; i < a.length; i++) d += Math.abs(a[i] - b[i]);
    return d / a.length / 255;
  };
  let fast: Buffer | null = null, inferenceMs = 0;
  try {
    const r = await pipeline.removeBackground(bytes, { ...request, quality: 'fast' });
    fast = r.data;
    inferenceMs = r.timings.inference;
  } catch { /* no subject at 512: full disagreement */ }
  let flipped: Buffer | null = null;
  try {
    const mirrored = await sharp(bytes).flop().jpeg({ quality: 95 }).toBuffer();
    const r = await pipeline.removeBackground(mirrored, request);
    const meta = await sharp(matte, { raw: { width: r.width, height: r.height, channels: 1 } }).metadata();
    void meta;
    flipped = await sharp(r.data, { raw: { width: r.width, height: r.height, channels: 1 } }).flop().raw().toBuffer();
  } catch { /* no subject mirrored */ }
  return {
    disagreement: fast ? meanDiff(matte, fast) : 1,
    inferenceMs,
    flipDisagreement: flipped ? meanDiff(matte, flipped) : 1,
  };
}

async function collect(): Promise<Row[]> {
  const manifest = JSON.parse(fs.readFileSync(path.join(corpus!, 'manifest.json'), 'utf8')) as { images: { id: string; image: string; alpha?: string }[] };
  const request: RemoveRequest = { size: 'full', format: 'raw', bgColor: null, crop: false, mask: true, quality: (option(args, '--quality') ?? 'best') as RemoveRequest['quality'] };
  const pipeline = createPipeline({});
  await pipeline.loadModel({});
  const rows: Row[] = [];
  for (const entry of manifest.images) {
    const bytes = fs.readFileSync(path.join(corpus!, entry.image));
    let signals: MatteSignals | null = null;
    try {
      const r = await pipeline.removeBackground(bytes, request, { onSignals: (s) => (signals = s) });
      const { mae, iou } = await errorOf(r.data, path.join(corpus!, entry.alpha ?? `alpha/${entry.id}.png`), r.width, r.height);
      const row: Row = { id: entry.id, signals: signals!, confidence: r.confidence, mae, iou, ms: r.ms, signalMs: r.timings.confidence };
      if (args.includes('--second-look')) row.secondLook = await secondLook(pipeline, bytes, request, r.data);
      rows.push(row);
    } catch (err) {
      if (!(err instanceof CutoutError) || err.code !== 'no_subject_detected') throw err;
      // No cutout, no confidence: the caller gets no_subject_detected.
    }
  }
  await pipeline.close();
  return rows;
}

// ---- statistics ----

function ranks(xs: number[]): number[] {
  const order = xs.map((x, i) => [x, i] as const).sort((a, b) => a[0] - b[0]);
  const r = new Array<number>(xs.length);
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j + 1 < order.length && order[j + 1][0] === order[i][0]) j++;
    for (let k = i; k <= j; k++) r[order[k][1]] = (i + j) / 2;
    i = j + 1;
  }
  return r;
}

function pearson(a: number[], b: number[]): number {
  const n = a.length;
  const ma = a.reduce((s, x) => s + x, 0) / n, mb = b.reduce((s, x) => s + x, 0) / n;
  let sab = 0, saa = 0, sbb = 0;
  for (let i = 0; i < n; i++) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) ** 2;
    sbb += (b[i] - mb) ** 2;
  }
  return sab / Math.sqrt(saa * sbb);
}

const spearman = (a: number[], b: number[]) => pearson(ranks(a), ranks(b));

/** Of the `share` least confident (highest `risk`), the share of the total error they hold and of the bad ones. */
function caught(risk: number[], rows: Row[], share = 0.2): { error: number; bad: number } {
  const order = risk.map((r, i) => [r, i] as const).sort((a, b) => b[0] - a[0]).map(([, i]) => i);
  const top = order.slice(0, Math.round(share * rows.length));
  const total = rows.reduce((s, r) => s + r.mae, 0);
  const bad = rows.filter((r) => r.iou < 0.9).length;
  return {
    error: top.reduce((s, i) => s + rows[i].mae, 0) / total,
    bad: bad ? top.filter((i) => rows[i].iou < 0.9).length / bad : 1,
  };
}

function report(name: string, risk: number[], rows: Row[]): string {
  const c = caught(risk, rows);
  return `${name.padEnd(34)} spearman=${spearman(risk, rows.map((r) => r.mae)).toFixed(3)} top20_error=${(100 * c.error).toFixed(1)}% top20_bad=${(100 * c.bad).toFixed(1)}%`;
}

// ---- the fit: ridge regression of log MAE on the signals ----

const SIGNALS: readonly { signal: keyof MatteSignals; log: boolean }[] = [
  { signal: 'softness', log: true },
  { signal: 'bandPerArea', log: true },
  { signal: 'bandPerEdge', log: true },
  { signal: 'thresholdShift', log: true },
  { signal: 'outsideLargest', log: true },
  { signal: 'parts', log: false },
  { signal: 'frameTouch', log: false },
  { signal: 'cleaned', log: true },
  { signal: 'boxFill', log: false },
  { signal: 'area', log: true },
  { signal: 'colourOverlap', log: false },
];

const featureOf = (s: MatteSignals, f: { signal: keyof MatteSignals; log: boolean }) => (f.log ? Math.log(s[f.signal] + LOG_FLOOR) : s[f.signal]);
const target = (r: Row) => Math.log(r.mae + 1e-3);

/** Solves (A) x = b by Gaussian elimination with partial pivoting (A is small and symmetric positive definite). */
function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r][c]) > Math.abs(m[p][c])) p = r;
    [m[c], m[p]] = [m[p], m[c]];
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = m[r][c] / m[c][c];
      for (let k = c; k <= n; k++) m[r][k] -= f * m[c][k];
    }
  }
  return m.map((row, i) => row[n] / row[i]);
}

/** Ridge regression on standardized features, returned as a ConfidenceModel in the signals' own units. */
function fit(rows: Row[], features: typeof SIGNALS, lambda: number): ConfidenceModel {
  const X = rows.map((r) => features.map((f) => featureOf(r.signals, f)));
  const y = rows.map(target);
  const k = features.length;
  const mean = features.map((_, j) => X.reduce((s, x) => s + x[j], 0) / X.length);
  const sd = features.map((_, j) => Math.sqrt(X.reduce((s, x) => s + (x[j] - mean[j]) ** 2, 0) / X.length) || 1);
  const Z = X.map((x) => x.map((v, j) => (v - mean[j]) / sd[j]));
  const ym = y.reduce((s, v) => s + v, 0) / y.length;
  const A = Array.from({ length: k }, (_, i) => Array.from({ length: k }, (_, j) => Z.reduce((s, z) => s + z[i] * z[j], 0) + (i === j ? lambda : 0)));
  const b = Array.from({ length: k }, (_, i) => Z.reduce((s, z, n) => s + z[i] * (y[n] - ym), 0));
  const w = solve(A, b);
  const terms = features.map((f, j) => ({ signal: f.signal, log: f.log, weight: w[j] / sd[j] }));
  const intercept = ym - terms.reduce((s, t, j) => s + t.weight * mean[j], 0);
  // The confidence is then calibrated as the chance that a cutout is good (IoU >= 0.9): a logistic
  // regression of "good" on the predicted log error (Newton's method, one variable).
  const predicted = X.map((x) => intercept + x.reduce((s, v, j) => s + terms[j].weight * v, 0));
  const { center, scale } = logistic(predicted, rows.map((r) => r.iou >= 0.9));
  return { terms, intercept, center, scale };
}

// ---- the rank fit: what is judged is the ranking, so the weights are chosen for it ----

const RANK_WEIGHTS = Array.from({ length: 161 }, (_, i) => -4 + i * 0.05);

/**
 * The first feature (softness's log) with weight 1; each other feature's weight picked from -4..4
 * (steps of 0.05) to maximize the Spearman correlation of the prediction with the MAE on `rows`,
 * one feature at a time, twice over (the middle of the best plateau, so that ties do not pull the
 * weight to an end). A few free numbers, each chosen for the ranking itself: out of fold it
 * loses less than the ridge, whose per-fold intercepts and slopes shuffle the pooled ranking.
 */
function fitRank(rows: Row[], features: typeof SIGNALS): ConfidenceModel {
  const X = rows.map((r) => features.map((f) => featureOf(r.signals, f)));
  const mae = rows.map((r) => r.mae);
  const weights: number[] = features.map((_, j) => (j === 0 ? 1 : 0));
  const predict = (w: number[]) => X.map((x) => x.reduce((s, v, j) => s + w[j] * v, 0));
  for (let pass = 0; pass < 2; pass++) {
    for (let j = 1; j < features.length; j++) {
      const scores = RANK_WEIGHTS.map((w) => spearman(predict(weights.map((v, k) => (k === j ? w : v))), mae));
      const best = Math.max(...scores);
      const plateau = RANK_WEIGHTS.filter((_, i) => scores[i] >= best - 1e-12);
      weights[j] = plateau[Math.floor(plateau.length / 2)];
    }
  }
  const terms = features.map((f, j) => ({ signal: f.signal, log: f.log, weight: weights[j] }));
  const { center, scale } = logistic(predict(weights), rows.map((r) => r.iou >= 0.9));
  return { terms, intercept: 0, center, scale };
}

type Fitter = (rows: Row[], features: typeof SIGNALS) => ConfidenceModel;

/** P(good) = 1 / (1 + exp((x - center) / scale)), fitted by maximum likelihood (with a tiny ridge for separable data). */
function logistic(x: number[], good: boolean[]): { center: number; scale: number } {
  // On centred x, from the base rate and b = 0 (the usual start of iteratively reweighted least
  // squares, from which Newton's steps converge).
  const mean = x.reduce((s, v) => s + v, 0) / x.length;
  const xc = x.map((v) => v - mean);
  const rate = good.filter(Boolean).length / good.length;
  let a = Math.log(rate / (1 - rate)), b = 0; // P(good) = sigmoid(a + b xc)
  for (let iter = 0; iter < 50; iter++) {
    let ga = 0, gb = 0, haa = 1e-6, hab = 0, hbb = 1e-6;
    for (let i = 0; i < xc.length; i++) {
      const p = 1 / (1 + Math.exp(-(a + b * xc[i])));
      const y = good[i] ? 1 : 0;
      ga += y - p;
      gb += (y - p) * xc[i];
      const w = p * (1 - p);
      haa += w;
      hab += w * xc[i];
      hbb += w * xc[i] * xc[i];
    }
    const det = haa * hbb - hab * hab;
    a += (hbb * ga - hab * gb) / det;
    b += (haa * gb - hab * ga) / det;
  }
  a -= b * mean; // back to x itself
  // sigmoid(a + b x) = 1 / (1 + exp((x - center) / scale)) with:
  return { center: -a / b, scale: -1 / b };
}

/** A seeded shuffle (mulberry32), so that the folds are the same on every run. */
function shuffled<T>(xs: T[], seed: number): T[] {
  let a = seed >>> 0;
  const random = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * Out of fold, R times over (seeded shuffles): each image scored only by a model fitted without
 * it; the Spearman correlation and the top 20 %'s shares of each repeat's pooled scores, and
 * their mean and spread over the repeats.
 */
function outOfFold(rows: Row[], features: typeof SIGNALS, fitter: Fitter, folds: number, repeats: number): { spearman: number[]; error: number[]; bad: number[] } {
  const out = { spearman: [] as number[], error: [] as number[], bad: [] as number[] };
  for (let rep = 0; rep < repeats; rep++) {
    const risk = new Array<number>(rows.length).fill(0);
    const order = shuffled(rows.map((_, i) => i), 20261127 + rep);
    for (let f = 0; f < folds; f++) {
      const held = new Set(order.filter((_, i) => i % folds === f));
      const model = fitter(rows.filter((_, i) => !held.has(i)), features);
      // The predicted log error ranks; the confidence is a monotone map of it, calibrated per fit.
      for (const i of held) risk[i] = predictedLogError(rows[i].signals, model);
    }
    const c = caught(risk, rows);
    out.spearman.push(spearman(risk, rows.map((r) => r.mae)));
    out.error.push(c.error);
    out.bad.push(c.bad);
  }
  return out;
}

function reportOutOfFold(name: string, o: ReturnType<typeof outOfFold>): string {
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  const sd = (xs: number[]) => Math.sqrt(mean(xs.map((x) => (x - mean(xs)) ** 2)));
  return `${name.padEnd(34)} spearman=${mean(o.spearman).toFixed(3)} (sd ${sd(o.spearman).toFixed(3)}, min ${Math.min(...o.spearman).toFixed(3)}) top20_error=${(100 * mean(o.error)).toFixed(1)}% top20_bad=${(100 * mean(o.bad)).toFixed(1)}%`;
}

/** What `--review-below T` flags on this set with the shipped model: the docs' table. */
function thresholdTable(rows: Row[]): string {
  const bad = rows.filter((r) => r.iou < 0.9).length;
  const total = rows.reduce((s, r) => s + r.mae, 0);
  const lines = ['| below | cutouts flagged | bad ones (IoU < 0.9) among the flagged | of all the bad ones | of the total error |', '|---|---|---|---|---|'];
  for (const t of [0.3, 0.5, 0.7, 0.8, 0.9]) {
    const flagged = rows.filter((r) => confidenceOf(r.signals) < t);
    const flaggedBad = flagged.filter((r) => r.iou < 0.9).length;
    const pct = (x: number) => `${(100 * x).toFixed(0)} %`;
    lines.push(`| ${t} | ${flagged.length} (${pct(flagged.length / rows.length)}) | ${flagged.length ? pct(flaggedBad / flagged.length) : '-'} | ${flaggedBad} of ${bad} (${pct(flaggedBad / bad)}) | ${pct(flagged.reduce((s, r) => s + r.mae, 0) / total)} |`);
  }
  return lines.join('\n') + '\n';
}

async function main(): Promise<void> {
  const datasetFile = option(args, '--dataset');
  let rows: Row[];
  if (datasetFile && fs.existsSync(datasetFile)) rows = JSON.parse(fs.readFileSync(datasetFile, 'utf8')) as Row[];
  else {
    rows = await collect();
    if (datasetFile) fs.writeFileSync(datasetFile, JSON.stringify(rows, null, 1));
  }
  const folds = Number(option(args, '--folds') ?? 5);
  const repeats = Number(option(args, '--repeats') ?? 10);
  const lambda = Number(option(args, '--lambda') ?? 2);
  const bad = rows.filter((r) => r.iou < 0.9).length;
  process.stdout.write(`cutouts=${rows.length} bad(IoU<0.9)=${bad} mean_mae=${(rows.reduce((s, r) => s + r.mae, 0) / rows.length).toFixed(4)}\n`);
  const perfect = rows.map((r) => r.mae);
  process.stdout.write(report('perfect ranking (by the real MAE)', perfect, rows) + '\n');
  for (const f of SIGNALS) process.stdout.write(report(`signal ${f.signal}`, rows.map((r) => featureOf(r.signals, f) * (f.signal === 'boxFill' ? -1 : 1)), rows) + '\n');
  if (rows[0]?.secondLook) {
    process.stdout.write(report('second look: fast-pass disagreement', rows.map((r) => r.secondLook!.disagreement), rows) + '\n');
    process.stdout.write(report('second look: mirrored disagreement', rows.map((r) => r.secondLook!.flipDisagreement ?? 1), rows) + '\n');
    process.stdout.write(report('softness x fast disagreement', rows.map((r) => Math.log(r.signals.softness + LOG_FLOOR) + Math.log(r.secondLook!.disagreement + LOG_FLOOR)), rows) + '\n');
    process.stdout.write(report('softness x mirrored disagreement', rows.map((r) => Math.log(r.signals.softness + LOG_FLOOR) + Math.log((r.secondLook!.flipDisagreement ?? 1) + LOG_FLOOR)), rows) + '\n');
    const inf = rows.reduce((s, r) => s + r.secondLook!.inferenceMs, 0), all = rows.reduce((s, r) => s + r.ms, 0);
    process.stdout.write(`second look at fast: model time ${(inf / rows.length).toFixed(0)} ms per image, ratio to a removal ${(inf / all).toFixed(3)}\n`);
  }
  process.stdout.write(report('shipped CONFIDENCE_MODEL (in sample)', rows.map((r) => 1 - confidenceOf(r.signals, CONFIDENCE_MODEL)), rows) + '\n');
  // --features a,b,c: fit on those signals only (the shipped model's, by default).
  const chosen = option(args, '--features')?.split(',') ?? CONFIDENCE_MODEL.terms.map((t) => t.signal);
  const features = SIGNALS.filter((f) => chosen.includes(f.signal));
  const ridge: Fitter = (r, f) => fit(r, f, lambda);
  const named = features.map((f) => f.signal).join('+');
  process.stdout.write(`out of fold, ${folds} folds x ${repeats} shuffles (mean over the shuffles of each one's pooled ranking):\n`);
  process.stdout.write(reportOutOfFold(`rank fit on ${named}`, outOfFold(rows, features, fitRank, folds, repeats)) + '\n');
  process.stdout.write(reportOutOfFold(`ridge on ${named}, lambda ${lambda}`, outOfFold(rows, features, ridge, folds, repeats)) + '\n');
  process.stdout.write(reportOutOfFold(`ridge on all ${SIGNALS.length} signals`, outOfFold(rows, SIGNALS, ridge, folds, repeats)) + '\n');
  const removal = rows.reduce((s, r) => s + r.ms, 0);
  const signalMs = rows.reduce((s, r) => s + r.signalMs, 0);
  process.stdout.write(`cost: signals ${(signalMs / rows.length).toFixed(1)} ms per image against a removal of ${(removal / rows.length).toFixed(0)} ms (ratio ${(signalMs / removal).toFixed(4)})\n`);
  process.stdout.write(thresholdTable(rows));
  if (args.includes('--fit')) process.stdout.write(JSON.stringify(option(args, '--method') === 'ridge' ? fit(rows, features, lambda) : fitRank(rows, features), null, 2) + '\n');
}

await main();
