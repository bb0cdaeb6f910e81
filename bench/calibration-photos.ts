/**
 * The shipped calibration photos (models/calibration/photos) as a side's quality setting puts them
 * on the model's grid: shared by `npm run calibrate:int8`, which measures the activation ranges on
 * them, and `npm run bench:int8-sensitivity`, which scores int8 models against fp32 on them.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import type { ModelManifest } from '../dist/toolchain/manifest.js';
import { inputPlan, QUALITY_PARAMS, type InputPlan } from '../dist/toolchain/variants.js';
import { openImage } from '../dist/pipeline/decode.js';
import { modelInput } from '../dist/pipeline/process.js';
import { QUALITIES, type Quality } from '../dist/options.js';
import { CALIBRATION_DIR } from '../dist/toolchain/int8.js';

export const CALIBRATION_PHOTOS_DIR = path.join(CALIBRATION_DIR, 'photos');

/** The calibration photos' file names, sorted. */
export function calibrationPhotoNames(): string[] {
  return fs.readdirSync(CALIBRATION_PHOTOS_DIR).filter((f) => /\.(jpe?g|png)$/i.test(f)).sort();
}

/** The quality setting whose grid has input side `side` (`best` at the model's own); throws for a side no setting of the model uses. */
export function qualityAtSide(manifest: ModelManifest, side: number): Quality {
  if (side === manifest.input.width) return 'best';
  const quality = QUALITIES.find((q) => QUALITY_PARAMS.sides[q] === side && q !== 'max');
  if (!quality || !manifest.sides.includes(side)) throw new Error(`--side ${side}: not a side of a quality setting that ${manifest.name} supports`);
  return quality;
}

/** One photo on the model's grid as the pipeline puts it there for `quality`: the input tensor and the plan. */
export async function calibrationInput(manifest: ModelManifest, quality: Quality, name: string): Promise<{ input: ort.Tensor; plan: InputPlan }> {
  const src = await openImage(fs.readFileSync(path.join(CALIBRATION_PHOTOS_DIR, name)));
  const plan = inputPlan(manifest, quality, src.probe.width, src.probe.height);
  const { tensor } = await modelInput(src, manifest, plan);
  return { input: new ort.Tensor('float32', tensor, [1, 3, plan.height, plan.width]), plan };
}
