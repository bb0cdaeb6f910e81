/**
 * `npm run calibrate:int8 [-- --model NAME]`
 *
 * Measures the activation ranges the int8 model needs, once, on the photos shipped in
 * models/calibration/photos (never the quality corpus), and writes them as data to
 * models/calibration/<model>.ranges.json, keyed by the sha256 of the fp32 model they were
 * measured on. The install then only rewrites the graph (quantize.ts): fast and deterministic,
 * no photos read, no inference run.
 *
 * Each photo is prepared as the pipeline prepares it at `best` (stretched to the model's grid
 * with a linear kernel, normalised by the manifest) and run once through a copy of the model
 * with a ReduceMin and ReduceMax on every tensor to calibrate. Both the global min/max and the
 * mean over photos of each photo's min/max are kept; weights.ts picks the method measured best.
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import * as ort from 'onnxruntime-node';
import { resolveModel } from '../pipeline/manifest.js';
import { ensureRunnableModel, trustedSha256 } from '../pipeline/weights.js';
import { calibrationGraph } from '../pipeline/quantize.js';
import { rgbToTensor } from '../pipeline/matte.js';
import { CALIBRATION_DIR, type CalibrationFile } from '../pipeline/int8.js';

const args = process.argv.slice(2);
const modelArg = args.indexOf('--model');
const manifest = resolveModel(modelArg >= 0 ? args[modelArg + 1] : 'isnet-medium');
const photosDir = path.join(CALIBRATION_DIR, 'photos');
const photos = fs.readdirSync(photosDir).filter((f) => /\.(jpe?g|png)$/i.test(f)).sort();

const fp32 = await ensureRunnableModel(manifest);
const fp32Sha256 = await trustedSha256(fp32);
const { bytes, tensors } = calibrationGraph(fs.readFileSync(fp32));
const session = await ort.InferenceSession.create(bytes, { executionProviders: ['cpu'], graphOptimizationLevel: 'all' });
const outputs = tensors.flatMap((t) => [`${t}::min`, `${t}::max`]);

const perPhoto: { min: number; max: number }[][] = tensors.map(() => []);
const { width, height, mean, std } = manifest.input;
for (const photo of photos) {
  const started = performance.now();
  const rgb = await sharp(path.join(photosDir, photo)).rotate().removeAlpha().toColourspace('srgb').resize(width, height, { fit: 'fill', kernel: 'linear' }).raw().toBuffer();
  const input = new ort.Tensor('float32', rgbToTensor(rgb, width, height, mean, std), [1, 3, height, width]);
  const out = await session.run({ [manifest.input.name]: input }, outputs);
  tensors.forEach((t, i) => perPhoto[i].push({ min: (out[`${t}::min`].data as Float32Array)[0], max: (out[`${t}::max`].data as Float32Array)[0] }));
  process.stdout.write(`${photo}: ${Math.round(performance.now() - started)} ms\n`);
}

const ranges: CalibrationFile['ranges'] = {};
tensors.forEach((t, i) => {
  const seen = perPhoto[i];
  ranges[t] = {
    min: Math.min(...seen.map((s) => s.min)),
    max: Math.max(...seen.map((s) => s.max)),
    meanMin: seen.reduce((a, s) => a + s.min, 0) / seen.length,
    meanMax: seen.reduce((a, s) => a + s.max, 0) / seen.length,
  };
});
const file: CalibrationFile = { model: manifest.name, fp32Sha256, photos, ranges };
const target = path.join(CALIBRATION_DIR, `${manifest.name}.ranges.json`);
fs.writeFileSync(target, JSON.stringify(file, null, 1) + '\n');
process.stdout.write(`${tensors.length} tensors from ${photos.length} photos -> ${target}\n`);
