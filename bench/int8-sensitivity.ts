/**
 * `npm run bench:int8-sensitivity -- [--side 512] [--photos N] [--out FILE]`
 * `npm run bench:int8-sensitivity -- --side 512 --keep-top 2,4,8,16 [--ranking FILE]`
 * `npm run bench:int8-sensitivity -- --side 512 --keep-stages stage4,stage4+stage5+stage6`
 *
 * Which Conv nodes lose the int8 model its accuracy at one input side (issue 27, target 2). On the
 * shipped calibration photos (models/calibration/photos, never the quality corpus, so that the
 * choice is not fitted to the test set), prepared as the side's quality setting prepares them:
 * 1. the fp32 variant's output is the reference;
 * 2. the int8 model with no node kept in fp32 gives the baseline error;
 * 3. for each quantized Conv, the int8 model with that one node kept in fp32: how much the error
 *    falls (leave-one-out). Written, ranked, to --out (JSON) for --keep-top to read.
 * With --keep-top K,.. (the top K of the ranking) or --keep-stages S,.. (whole ISNet stages; `none`
 * for the int8 model as built): the int8 model with that set kept in fp32, its error, and the
 * median time of a run against fp32's (all models taking turns on each photo), to choose a set
 * before scoring it on the quality corpus.
 *
 * The error is measured on the model's own output (the subject probability, in the letterboxed
 * content only): MAE, and the share of pixels on the other side of 0.5 from fp32 (what moves IoU).
 * Models are built in memory and run in sessions made here; nothing is cached. At 512 px: about
 * 13 s per model with 21 photos on 2 shared cores, 112 models, about 25 minutes.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { resolveModel, type ModelManifest } from '../dist/toolchain/manifest.js';
import { ensureRunnableModel, ensureVariant, readModelBytes } from '../dist/toolchain/weights.js';
import type { InputPlan } from '../dist/toolchain/variants.js';
import { quantizeModel } from '../dist/toolchain/quantize.js';
import { calibrationFile, selectRanges, type CalibrationFile } from '../dist/toolchain/int8.js';
import { calibrationInput, calibrationPhotoNames, qualityAtSide } from './calibration-photos.js';
import { contentError } from './int8-error.js';
import { option } from './common.js';

const args = process.argv.slice(2);

interface Photo {
  name: string;
  input: ort.Tensor;
  plan: InputPlan;
  reference?: Float32Array;
}

/** The error of one model's outputs against fp32's, mean over photos, and its worst photo. */
interface OutputError {
  mae: number;
  flipped: number;
  worstMae: number;
  worstPhoto: string;
}

async function loadPhotos(manifest: ModelManifest, side: number, limit: number): Promise<Photo[]> {
  const quality = qualityAtSide(manifest, side);
  const photos: Photo[] = [];
  for (const name of calibrationPhotoNames().slice(0, limit)) photos.push({ name, ...(await calibrationInput(manifest, quality, name)) });
  return photos;
}

/** Runs a model on every photo: the outputs and the median time of a run (after one warm-up). */
async function runAll(manifest: ModelManifest, bytes: Uint8Array, photos: Photo[]): Promise<{ outputs: Float32Array[]; medianMs: number }> {
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ['cpu'], graphOptimizationLevel: 'all' });
  try {
    await session.run({ [manifest.input.name]: photos[0].input }, [manifest.output.name]);
    const outputs: Float32Array[] = [];
    const times: number[] = [];
    for (const p of photos) {
      const started = performance.now();
      const out = await session.run({ [manifest.input.name]: p.input }, [manifest.output.name]);
      times.push(performance.now() - started);
      outputs.push(out[manifest.output.name].data as Float32Array);
    }
    times.sort((a, b) => a - b);
    return { outputs, medianMs: times[Math.floor(times.length / 2)] };
  } finally {
    await session.release();
  }
}

function errorOf(outputs: Float32Array[], photos: Photo[]): OutputError {
  const each = photos.map((p, i) => contentError(outputs[i], p.reference!, p.plan));
  const worst = each.reduce((w, e, i) => (e.mae > each[w].mae ? i : w), 0);
  return {
    mae: each.reduce((s, e) => s + e.mae, 0) / each.length,
    flipped: each.reduce((s, e) => s + e.flipped, 0) / each.length,
    worstMae: each[worst].mae,
    worstPhoto: photos[worst].name,
  };
}

const fmt = (e: OutputError) => `mae=${e.mae.toFixed(5)} flipped=${(e.flipped * 100).toFixed(3)}% worst=${e.worstMae.toFixed(4)} (${e.worstPhoto})`;

/** Leave-one-out over every quantized conv, ranked by how much keeping it in fp32 lowers the MAE. */
async function screen(manifest: ModelManifest, bytes: Uint8Array, ranges: ReturnType<typeof selectRanges>, photos: Photo[]) {
  const base = quantizeModel(bytes, { ranges });
  const baseline = errorOf((await runAll(manifest, base.bytes, photos)).outputs, photos);
  process.stdout.write(`baseline int8 (${base.quantizedConvs} convs): ${fmt(baseline)}\n`);
  const rows: { node: string; error: OutputError; maeGain: number; flipGain: number }[] = [];
  for (const [k, node] of base.quantizedNames.entries()) {
    const model = quantizeModel(bytes, { ranges, keepFloat: new Set([node]) });
    const error = errorOf((await runAll(manifest, model.bytes, photos)).outputs, photos);
    rows.push({ node, error, maeGain: baseline.mae - error.mae, flipGain: baseline.flipped - error.flipped });
    process.stdout.write(`${k + 1}/${base.quantizedNames.length} ${node}: ${fmt(error)} gain=${(baseline.mae - error.mae).toFixed(5)}\n`);
  }
  rows.sort((a, b) => b.maeGain - a.maeGain);
  return { baseline, rows };
}

/**
 * Each named set of convs kept in fp32: the int8 model's error, and the median time of a run
 * against fp32's. All sessions are open at once and take turns on each photo (fp32 included), so
 * that the load of anything else on the machine falls on every model alike: on 2 shared cores,
 * timing one model after the other gave ratios off by 2x.
 */
async function keepSets(manifest: ModelManifest, bytes: Uint8Array, ranges: ReturnType<typeof selectRanges>, photos: Photo[], sets: { label: string; nodes: string[] }[]) {
  const models = [{ label: 'fp32', bytes, floatConvs: -1 }, ...sets.map(({ label, nodes }) => ({ label, ...quantizeModel(bytes, { ranges, keepFloat: new Set(nodes) }) }))];
  const sessions = await Promise.all(models.map((m) => ort.InferenceSession.create(m.bytes, { executionProviders: ['cpu'], graphOptimizationLevel: 'all' })));
  const outputs: Float32Array[][] = models.map(() => []);
  const times: number[][] = models.map(() => []);
  for (const session of sessions) await session.run({ [manifest.input.name]: photos[0].input }, [manifest.output.name]); // warm-up
  for (const p of photos) {
    for (const [k, session] of sessions.entries()) {
      const started = performance.now();
      const out = await session.run({ [manifest.input.name]: p.input }, [manifest.output.name]);
      times[k].push(performance.now() - started);
      outputs[k].push(out[manifest.output.name].data as Float32Array);
    }
  }
  await Promise.all(sessions.map((s) => s.release()));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const fp32Ms = median(times[0]);
  for (const [k, m] of models.entries()) {
    if (k === 0) continue;
    process.stdout.write(`keep ${m.label} (${m.floatConvs} fp32 convs in all): ${fmt(errorOf(outputs[k], photos))} run=${median(times[k]).toFixed(0)} ms (fp32 ${fp32Ms.toFixed(0)} ms, ${(fp32Ms / median(times[k])).toFixed(2)}x faster)\n`);
  }
}

/**
 * The sets asked for: `--keep-top 2,4` (the top K of the ranking) or `--keep-stages stage4,stage4+stage5`
 * (every quantized conv of those ISNet stages, e.g. `/stage4/...`, whose cost in fp32 falls with
 * their resolution: stage4 runs at 1/16 of the input side, stage6 at 1/64).
 */
function setsAsked(ranking: () => string[], quantized: string[]): { label: string; nodes: string[] }[] {
  const top = option(args, '--keep-top');
  const stages = option(args, '--keep-stages');
  if (top) return top.split(',').map((k) => ({ label: `top ${k}`, nodes: ranking().slice(0, Number(k)) }));
  return (stages ?? '').split(',').filter(Boolean).map((group) => {
    const names = group.split('+');
    return { label: group, nodes: quantized.filter((n) => names.includes(n.split('/')[1])) };
  });
}

const manifest = resolveModel(option(args, '--model') ?? 'isnet-medium');
const side = Number(option(args, '--side') ?? 512);
const photos = await loadPhotos(manifest, side, Number(option(args, '--photos') ?? Infinity));
const bytes = await readModelBytes(side === manifest.input.width ? await ensureRunnableModel(manifest) : await ensureVariant(manifest, side));
const ranges = selectRanges(JSON.parse(fs.readFileSync(calibrationFile(manifest, side), 'utf8')) as CalibrationFile);
const fp32 = await runAll(manifest, bytes, photos);
photos.forEach((p, i) => (p.reference = fp32.outputs[i]));
process.stdout.write(`${manifest.name} at ${side} px, ${photos.length} calibration photos; fp32 run ${fp32.medianMs.toFixed(0)} ms\n`);

// The ranking is a bench result, not data the package ships: kept out of the repository by default.
const defaultOut = path.join(os.tmpdir(), `int8-sensitivity-${manifest.name}-${side}.json`);
if (args.includes('--keep-top') || args.includes('--keep-stages')) {
  const ranking = () => (JSON.parse(fs.readFileSync(option(args, '--ranking') ?? defaultOut, 'utf8')) as { rows: { node: string }[] }).rows.map((r) => r.node);
  const sets = setsAsked(ranking, quantizeModel(bytes, { ranges }).quantizedNames);
  await keepSets(manifest, bytes, ranges, photos, sets);
} else {
  const result = await screen(manifest, bytes, ranges, photos);
  const out = option(args, '--out') ?? defaultOut;
  fs.writeFileSync(out, JSON.stringify({ model: manifest.name, side, photos: photos.map((p) => p.name), ...result }, null, 1) + '\n');
  for (const r of result.rows.slice(0, 24)) process.stdout.write(`${r.maeGain.toFixed(5)} ${(r.flipGain * 100).toFixed(3)}% ${r.node}\n`);
  process.stdout.write(`-> ${out}\n`);
}
