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


/** Shipped calibration photos and the ranges measured on them (src/bench/calibrate-int8.ts). */
export const CALIBRATION_DIR = path.join(MODELS_DIR, 'calibration');

export interface CalibrationFile {
  model: string;
  /** sha256 of the fp32 model the ranges were measured on: ranges are tied to those weights. */
  fp32Sha256: string;
  photos: string[];
  ranges: Record<string, { min: number; max: number; meanMin: number; meanMax: number }>;
}

/**
 * How the activation ranges are taken from the calibration runs: `minmax`, the extremes over all
 * photos, or `mean`, the mean over photos of each photo's extremes (clips rare outliers, finer
 * steps for the common values). Chosen by measurement (README, "int8").
 */
export const CALIBRATION_METHOD: 'minmax' | 'mean' = 'mean';

/**
 * Conv nodes kept in fp32, beyond those the quantizer never touches (convs not followed by a
 * Relu: ISNet's input conv and six side outputs, which feed the resizes and the sigmoid).
 * Chosen by measurement (README, "int8"):
 * - the two deepest encoder stages (stage5, stage6, at 1/32 and 1/64 of the input side, but with
 *   256-512 channels): in int8 an empty photo of the public set came out with 2.7-3 % of its
 *   pixels above 0.5 where fp32 has 0.06 % (a subject found in an empty image: empty_ok 3/4). The
 *   global min/max there instead, kept in int8, fixed that photo but the mean IoU fell to 0.846
 *   (bar 0.849);
 * - of the last decoder stage (stage1d, at half the input side), only its first and last convs,
 *   whose outputs make the block's output (hx1d + hxin): with all of stage1d in int8 the quality
 *   bar held (IoU 0.851) but the cat fixture kept only 88.7 % of alpha values within 16 of fp32
 *   (the fur); with these two in fp32, 95.5 %. The whole stage in fp32 (the first version) cost
 *   273 ms of a 1387 ms int8 run in a profile.
 */
const FP32_STAGES: Record<string, string[]> = {
  stage1d: ['rebnconvin', 'rebnconv1d'],
  stage5: ['rebnconvin', 'rebnconv1', 'rebnconv2', 'rebnconv3', 'rebnconv4', 'rebnconv3d', 'rebnconv2d', 'rebnconv1d'],
  stage6: ['rebnconvin', 'rebnconv1', 'rebnconv2', 'rebnconv3', 'rebnconv4', 'rebnconv3d', 'rebnconv2d', 'rebnconv1d'],
};
export const KEEP_FLOAT: ReadonlySet<string> = new Set(
  Object.entries(FP32_STAGES).flatMap(([stage, blocks]) => blocks.map((block) => `/${stage}/${block}/conv_s1/Conv`)),
);

export function calibrationFile(manifest: ModelManifest): string {
  return path.join(CALIBRATION_DIR, `${manifest.name}.ranges.json`);
}

/** True when the model has shipped calibration data, i.e. an int8 copy can be built. */
export function hasCalibration(manifest: ModelManifest): boolean {
  return fs.existsSync(calibrationFile(manifest));
}

export function selectRanges(file: CalibrationFile, method = CALIBRATION_METHOD): Record<string, TensorRange> {
  const out: Record<string, TensorRange> = {};
  for (const [name, r] of Object.entries(file.ranges)) out[name] = method === 'minmax' ? { min: r.min, max: r.max } : { min: r.meanMin, max: r.meanMax };
  return out;
}

/** Bumped when quantize.ts changes what it writes: part of the int8 file's name. */
const QUANTIZER_VERSION = 1;

/**
 * A digest of everything the int8 file depends on besides the fp32 weights (the ranges file, the
 * method, the fp32 nodes, the quantizer): part of its cache name, so changing any of them builds
 * a new file instead of trusting an old one whose sidecar still matches.
 */
export function int8BuildKey(manifest: ModelManifest): string {
  let ranges = '';
  try {
    ranges = fs.readFileSync(calibrationFile(manifest), 'utf8');
  } catch {
    // No calibration data: the build fails with its own message.
  }
  return crypto.createHash('sha256').update(JSON.stringify([QUANTIZER_VERSION, CALIBRATION_METHOD, [...KEEP_FLOAT].sort(), ranges])).digest('hex').slice(0, 10);
}

/** The int8 model from the fp32 bytes (of the model or one of its side variants). */
export function buildInt8(manifest: ModelManifest, fp32Sha256: string, bytes: Uint8Array): Buffer {
  let file: CalibrationFile;
  try {
    file = JSON.parse(fs.readFileSync(calibrationFile(manifest), 'utf8')) as CalibrationFile;
  } catch {
    throw new CutoutError('processing_failed', `Model ${manifest.name} has no int8 calibration data (${calibrationFile(manifest)})`);
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
 * fp32 MAE 0.0241, IoU 0.854, band MAE 0.1114, iou50 0.90, empty_ok 4/4; int8 (the ranges,
 * method and fp32 convs above, on the one-output fp32 copy) MAE 0.0241, IoU 0.852, band MAE
 * 0.1108, iou50 0.90, empty_ok 4/4.
 * Measured at `best` (side 1024) only: `auto` takes int8 at that side alone (resolvePrecision).
 * Set back to false if a change to the quantization fails that bar: `auto` then stays fp32.
 */
export const INT8_QUALITY_PASSED = true;

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

let defaultPrecision: Precision = 'auto';
/** Sets the precision used when a request names none (CUTOUT_PRECISION or config `precision`). */
export function setDefaultPrecision(p: Precision): void {
  defaultPrecision = p;
}

/**
 * The precision a request runs at on this machine, for the model input side `side`. `auto` takes
 * int8 only at the manifest's own side (`--quality best` and `max`), the one whose quality was
 * measured against the bar; the smaller sides of `fast` and `balanced` stay fp32 unless int8 is
 * asked for by name.
 */
export function resolvePrecision(manifest: ModelManifest, precision: Precision | undefined, side = manifest.input.width): 'fp32' | 'int8' {
  const p = precision ?? defaultPrecision;
  if (p === 'fp32' || p === 'int8') return p;
  if (side !== manifest.input.width) return 'fp32';
  return autoPrecision(cpuFlags(), INT8_QUALITY_PASSED, hasCalibration(manifest));
}
