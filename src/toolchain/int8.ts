/**
 * The int8 copy of a model (issue 17): which calibration data it is built from, which nodes stay
 * fp32, and when `--precision auto` picks it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { CutoutError } from '../errors.js';
import type { Precision } from '../options.js';
import { MODELS_DIR, type ModelManifest } from './manifest.js';
import { quantizeModel, type TensorRange } from './quantize.js';


/** Shipped calibration photos and the ranges measured on them (bench/calibrate-int8.ts). */
export const CALIBRATION_DIR = path.join(MODELS_DIR, 'calibration');

export interface CalibrationFile {
  model: string;
  /** sha256 of the fp32 model the ranges were measured on: ranges are tied to those weights. */
  fp32Sha256: string;
  photos: string[];
  /** The percentile of `percentileMin`/`percentileMax` (e.g. 99.99: 0.01 % of the values above the max). */
  percentile?: number;
  ranges: Record<string, { min: number; max: number; meanMin: number; meanMax: number; percentileMin?: number; percentileMax?: number }>;
}

/**
 * How the activation ranges are taken from the calibration runs: `minmax`, the extremes over all
 * photos; `mean`, the mean over photos of each photo's extremes; `percentile`, the range that
 * holds all but CALIBRATION_PERCENTILE's share of every value seen (a histogram over all photos).
 * Chosen by measurement (docs/models.md and docs/internals.md, "int8"): ISNet's activations are heavy-tailed (the input of
 * stage1d's first conv reaches 442 but 99.99 % of its values lie under 16.5), so a range set by
 * the extremes spends the uint8 steps on a few outliers and rounds the common values coarsely.
 */
export const CALIBRATION_METHOD: 'minmax' | 'mean' | 'percentile' = 'percentile';

/** The percentile measured by `npm run calibrate:int8` (99.99: measured best of 99.9, 99.99, 99.995, 99.999). */
export const CALIBRATION_PERCENTILE = 99.99;

/**
 * Conv nodes kept in fp32, beyond those the quantizer never touches (convs not followed by a
 * Relu: ISNet's input conv and its side output, which feeds the resize and the sigmoid). None:
 * with the percentile ranges every Conv+Relu runs in int8 and the model still passes the quality
 * bar (docs/models.md and docs/internals.md, "int8"). With the earlier ranges (the mean of each photo's extremes) 18 of the
 * 112 had to stay fp32 (stage5, stage6 for an empty photo of the public set, two convs of
 * stage1d for the cat's fur), which left the int8 run at 0.60-0.64x of fp32's instead of 0.48x.
 * Names here are Conv node names, e.g. `/stage5/rebnconvin/conv_s1/Conv`.
 */
export const KEEP_FLOAT: ReadonlySet<string> = new Set<string>();

/**
 * Where the ranges measured at input side `side` itself live (`npm run calibrate:int8` writes
 * them): `<model>.ranges.json` at the model's own size, `<model>.side<S>.ranges.json` at a
 * smaller side (measured on that side's variant, the photos letterboxed as `fast` and `balanced` do).
 */
export function rangesFileAt(manifest: ModelManifest, side = manifest.input.width): string {
  const suffix = side === manifest.input.width ? '' : `.side${side}`;
  return path.join(CALIBRATION_DIR, `${manifest.name}${suffix}.ranges.json`);
}

/** The ranges file an int8 copy at input side `side` is built from: the side's own when it ships, else the model's. */
export function calibrationFile(manifest: ModelManifest, side = manifest.input.width): string {
  const own = rangesFileAt(manifest, side);
  return side === manifest.input.width || fs.existsSync(own) ? own : rangesFileAt(manifest);
}

/** True when the model has shipped calibration data, i.e. an int8 copy can be built. */
export function hasCalibration(manifest: ModelManifest): boolean {
  return fs.existsSync(calibrationFile(manifest));
}

/** int8Sides by model (name and weights): what ships does not change under a running process. */
const int8SidesByModel = new Map<string, readonly number[]>();

/**
 * The sides at which `auto` may take int8 for this model: none without calibration data; else its
 * own, and those in INT8_SIDES_PASSED with ranges of their own. Looked up once per model and
 * process: resolvePrecision asks for every image.
 */
export function int8Sides(manifest: ModelManifest): readonly number[] {
  const key = `${manifest.name}:${manifest.sha256}`;
  let sides = int8SidesByModel.get(key);
  if (!sides) {
    const own = manifest.input.width;
    sides = !hasCalibration(manifest) ? [] : [own, ...manifest.sides.filter((s) => s !== own && INT8_SIDES_PASSED.has(s) && fs.existsSync(rangesFileAt(manifest, s)))];
    int8SidesByModel.set(key, sides);
  }
  return sides;
}

export function selectRanges(file: CalibrationFile, method = CALIBRATION_METHOD): Record<string, TensorRange> {
  if (method === 'percentile' && file.percentile !== CALIBRATION_PERCENTILE) {
    throw new CutoutError('processing_failed', `The int8 calibration data holds no ${CALIBRATION_PERCENTILE} percentile ranges; run npm run calibrate:int8`);
  }
  const out: Record<string, TensorRange> = {};
  for (const [name, r] of Object.entries(file.ranges)) {
    out[name] = method === 'minmax' ? { min: r.min, max: r.max } : method === 'mean' ? { min: r.meanMin, max: r.meanMax } : { min: r.percentileMin!, max: r.percentileMax! };
  }
  return out;
}

/** Bumped when quantize.ts changes what it writes: part of the int8 file's name. */
const QUANTIZER_VERSION = 2;

/**
 * A digest of everything the int8 file depends on besides the fp32 weights (the ranges file, the
 * method, the fp32 nodes, the quantizer): part of its cache name, so changing any of them builds
 * a new file instead of trusting an old one whose sidecar still matches.
 */
export function int8BuildKey(manifest: ModelManifest, side = manifest.input.width): string {
  let ranges = '';
  try {
    ranges = fs.readFileSync(calibrationFile(manifest, side), 'utf8');
  } catch {
    // No calibration data: the build fails with its own message.
  }
  return crypto.createHash('sha256').update(JSON.stringify([QUANTIZER_VERSION, CALIBRATION_METHOD, [...KEEP_FLOAT].sort(), ranges])).digest('hex').slice(0, 10);
}

/** The int8 model from the fp32 bytes of the model or of its variant for input side `side`. */
export function buildInt8(manifest: ModelManifest, fp32Sha256: string, bytes: Uint8Array, side = manifest.input.width): Buffer {
  const ranges = calibrationFile(manifest, side);
  let file: CalibrationFile;
  try {
    file = JSON.parse(fs.readFileSync(ranges, 'utf8')) as CalibrationFile;
  } catch {
    throw new CutoutError('processing_failed', `Model ${manifest.name} has no int8 calibration data (${ranges})`);
  }
  if (file.fp32Sha256 !== fp32Sha256) {
    throw new CutoutError('processing_failed', `The int8 calibration of ${manifest.name} was measured on other weights (fp32 sha256 ${file.fp32Sha256.slice(0, 12)}, have ${fp32Sha256.slice(0, 12)})`);
  }
  return quantizeModel(bytes, { ranges: selectRanges(file), keepFloat: KEEP_FLOAT }).bytes;
}

/**
 * Whether the int8 model passed the quality bar of issue 17 on the public quality set at `best`
 * (IoU >= fp32 - 0.005, MAE and band MAE <= 1.05x fp32, same iou50, empty_ok 4/4). Measured with
 * `npm run bench:quality -- ../shared/quality/public --quality best --precision fp32|int8`:
 * fp32 MAE 0.0241, IoU 0.854, band MAE 0.1114, iou50 0.90, empty_ok 4/4; int8 (percentile ranges,
 * every Conv+Relu in int8, pools, resizes and residual sums on uint8, on the one-output fp32
 * copy) MAE 0.0226, IoU 0.854, band MAE 0.1111, iou50 0.90, empty_ok 4/4.
 * Set back to false if a change to the quantization fails that bar: `auto` then stays fp32.
 */
export const INT8_QUALITY_PASSED = true;

/**
 * The smaller input sides (those of `fast` and `balanced`) at which the int8 copy passed the same
 * bar, each built from ranges measured at that side (`npm run calibrate:int8 -- --side S`; docs/models.md,
 * "int8"). `--quality balanced --precision fp32|int8`: fp32 MAE 0.0313, IoU 0.837, band MAE 0.1190,
 * iou50 0.85, empty_ok 4/4; int8 0.0328 (1.048x), 0.833, 0.1214, 0.85, 4/4: passed (with the
 * ranges of 1024 px it failed on MAE, 0.0341). `fast` (512) fails on IoU with either ranges
 * (0.766 with its own, 0.761 with 1024's, against 0.777): not listed, so `auto` keeps it fp32.
 * Keeping convs in fp32 at 512 (`npm run bench:int8-sensitivity`, ranked on the calibration
 * photos) did not pass within 24 convs: the top 2, 8 and 24 of the per-node ranking gave IoU
 * 0.768, 0.766, 0.767, and stages 4-6 (24 convs) 0.770, against a bar of 0.772. Stages 3-6 (34)
 * reached 0.774 with the model run still 1.43x faster than fp32's (no VNNI), but that set was
 * picked after seeing the public set's scores: docs/models.md, "int8", has the figures.
 */
export const INT8_SIDES_PASSED: ReadonlySet<number> = new Set([768]);

/**
 * The CPU's feature flags (Linux /proc/cpuinfo), or null where they cannot be read. Read once per
 * process: `auto` asks for every image, and the flags do not change under a running process.
 */
export function cpuFlags(): string[] | null {
  if (flagsRead === undefined) {
    try {
      const line = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1];
      flagsRead = line ? line.trim().split(/\s+/) : null;
    } catch {
      flagsRead = null;
    }
  }
  return flagsRead;
}
let flagsRead: string[] | null | undefined;

/** True when the flags show an 8-bit dot-product instruction (AVX512-VNNI or AVX-VNNI). */
export function hasVnni(flags: readonly string[] | null): boolean {
  return !!flags && (flags.includes('avx512_vnni') || flags.includes('avx_vnni'));
}

/**
 * What `auto` runs: int8 only on a CPU with VNNI (elsewhere onnxruntime's int8 kernels gain
 * little or lose) and only when the int8 model passed the quality bar; fp32 otherwise, and
 * whenever the flags are unknown.
 */
export function autoPrecision(flags: readonly string[] | null, qualityPassed: boolean, int8Available: boolean): 'fp32' | 'int8' {
  return autoChoice(flags, qualityPassed, int8Available).precision;
}

/** auto's pick with the reason, for `cutout models list`. */
export function autoChoice(flags: readonly string[] | null, qualityPassed: boolean, int8Available: boolean): { precision: 'fp32' | 'int8'; reason: string } {
  if (!int8Available) return { precision: 'fp32', reason: 'no int8 calibration for this model' };
  if (flags === null) return { precision: 'fp32', reason: 'CPU features unknown' };
  if (!hasVnni(flags)) return { precision: 'fp32', reason: 'CPU without AVX512-VNNI or AVX-VNNI' };
  if (!qualityPassed) return { precision: 'fp32', reason: 'CPU has VNNI, but int8 did not pass the quality bar' };
  return { precision: 'int8', reason: 'CPU has VNNI and int8 passed the quality bar' };
}

/**
 * The precision a request runs at on this machine, for the model input side `side`. `auto` takes
 * int8 only at the sides whose int8 copy passed the bar (int8Sides: the manifest's own, for
 * `--quality best` and `max`, and `balanced`'s); `fast` stays fp32 unless int8 is asked for by name.
 */
export function resolvePrecision(manifest: ModelManifest, precision: Precision, side = manifest.input.width): 'fp32' | 'int8' {
  if (precision === 'fp32' || precision === 'int8') return precision;
  if (!int8Sides(manifest).includes(side)) return 'fp32';
  return autoPrecision(cpuFlags(), INT8_QUALITY_PASSED, true);
}
