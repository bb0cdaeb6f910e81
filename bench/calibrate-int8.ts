/**
 * `npm run calibrate:int8 [-- --model NAME] [--side S]`
 *
 * Measures the activation ranges the int8 model needs, once, on the photos shipped in
 * models/calibration/photos (never the quality corpus), and writes them as data to
 * models/calibration/<model>.ranges.json, keyed by the sha256 of the fp32 model they were
 * measured on. The install then only rewrites the graph (quantize.ts): fast and deterministic,
 * no photos read, no inference run.
 *
 * Each photo is prepared as the pipeline prepares it (at `best`: stretched to the model's grid
 * with a linear kernel, normalised by the manifest; with `--side S`, the input side of `fast` or
 * `balanced`: letterboxed on that grid as those settings do, on that side's variant of the model,
 * written to `<model>.side<S>.ranges.json`). Two passes:
 * 1. a copy of the model with a ReduceMin and ReduceMax on every tensor to calibrate gives each
 *    tensor's extremes per photo (kept: the global min/max and the mean of each photo's extremes);
 * 2. the tensors themselves, fetched a few at a time, are counted into a histogram over those
 *    global extremes, from which the percentile range is read (CALIBRATION_PERCENTILE).
 * int8.ts picks the method measured best (CALIBRATION_METHOD). Takes a few minutes.
 */
import fs from 'node:fs';
import * as ort from 'onnxruntime-node';
import { resolveModel } from '../dist/toolchain/manifest.js';
import { ensureRunnableModel, ensureVariant, modelSha256, readModelBytes } from '../dist/toolchain/weights.js';
import { calibrationGraph, withTensorOutputs } from '../dist/toolchain/quantize.js';
import { CALIBRATION_PERCENTILE, rangesFileAt, type CalibrationFile } from '../dist/toolchain/int8.js';
import { calibrationInput, calibrationPhotoNames, qualityAtSide } from './calibration-photos.js';
import { Histogram } from '../dist/toolchain/histogram.js';

const args = process.argv.slice(2);
const modelArg = args.indexOf('--model');
const manifest = resolveModel(modelArg >= 0 ? args[modelArg + 1] : 'isnet-medium');
const sideArg = args.indexOf('--side');
const side = sideArg >= 0 ? Number(args[sideArg + 1]) : manifest.input.width;
const native = side === manifest.input.width;
const quality = qualityAtSide(manifest, side);
const photos = calibrationPhotoNames();
/** Tensors fetched per run in the second pass: a 1024 x 1024 map of 64 channels is 268 MB. */
const TENSORS_PER_RUN = 24;

// The ranges are tied to the fp32 weights (their sha256), of which a side's variant is a rewrite.
const fp32 = await ensureRunnableModel(manifest);
const fp32Sha256 = await modelSha256(fp32);
const fp32Bytes = await readModelBytes(native ? fp32 : await ensureVariant(manifest, side));
const { bytes, tensors } = calibrationGraph(fp32Bytes);

/** The photo on the model's grid as the pipeline puts it there. */
async function inputFor(photo: string): Promise<ort.Tensor> {
  return (await calibrationInput(manifest, quality, photo)).input;
}

// Pass 1: the extremes.
let session = await ort.InferenceSession.create(bytes, { executionProviders: ['cpu'], graphOptimizationLevel: 'all' });
const outputs = tensors.flatMap((t) => [`${t}::min`, `${t}::max`]);
const perPhoto: { min: number; max: number }[][] = tensors.map(() => []);
for (const photo of photos) {
  const started = performance.now();
  const out = await session.run({ [manifest.input.name]: await inputFor(photo) }, outputs);
  tensors.forEach((t, i) => perPhoto[i].push({ min: (out[`${t}::min`].data as Float32Array)[0], max: (out[`${t}::max`].data as Float32Array)[0] }));
  process.stdout.write(`extremes ${photo}: ${Math.round(performance.now() - started)} ms\n`);
}
await session.release();
const extremes = tensors.map((_, i) => ({ min: Math.min(...perPhoto[i].map((s) => s.min)), max: Math.max(...perPhoto[i].map((s) => s.max)) }));

// Pass 2: the histograms, over each tensor's global range (with 0 in it, as the uint8 range has).
const histograms = tensors.map((_, i) => new Histogram(Math.min(0, extremes[i].min), Math.max(0, extremes[i].max)));
// Basic optimisations only: fusions must not remove the tensors fetched.
session = await ort.InferenceSession.create(withTensorOutputs(fp32Bytes, tensors), { executionProviders: ['cpu'], graphOptimizationLevel: 'basic' });
for (const photo of photos) {
  const started = performance.now();
  const input = await inputFor(photo);
  for (let from = 0; from < tensors.length; from += TENSORS_PER_RUN) {
    const names = tensors.slice(from, from + TENSORS_PER_RUN);
    const out = await session.run({ [manifest.input.name]: input }, names);
    names.forEach((name, k) => histograms[from + k].add(out[name].data as Float32Array));
  }
  process.stdout.write(`histograms ${photo}: ${Math.round(performance.now() - started)} ms\n`);
}
await session.release();

const share = CALIBRATION_PERCENTILE / 100;
const ranges: CalibrationFile['ranges'] = {};
tensors.forEach((t, i) => {
  const seen = perPhoto[i];
  ranges[t] = {
    ...extremes[i],
    meanMin: seen.reduce((a, s) => a + s.min, 0) / seen.length,
    meanMax: seen.reduce((a, s) => a + s.max, 0) / seen.length,
    // Activations after a Relu have no negative side: their range starts at 0 either way.
    percentileMin: extremes[i].min < 0 ? histograms[i].lowerQuantile(1 - share) : 0,
    percentileMax: histograms[i].quantile(share),
  };
});
const file: CalibrationFile = { model: manifest.name, fp32Sha256, photos, percentile: CALIBRATION_PERCENTILE, ranges };
const target = rangesFileAt(manifest, side);
fs.writeFileSync(target, JSON.stringify(file, null, 1) + '\n');
process.stdout.write(`${tensors.length} tensors from ${photos.length} photos -> ${target}\n`);
