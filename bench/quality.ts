/**
 * `npm run bench:quality -- <corpus-dir> [--out DIR] [--model NAME] [--no-refine] [--no-decontaminate]
 *   [--quality fast|balanced|best|max] [--precision auto|fp32|int8] [--evaluator FILE]`
 *
 *   [--edge-params JSON]
 *
 * Runs the pipeline over a corpus laid out like shared/quality/public (images/, alpha/,
 * manifest.json) at full size, writes RGBA cutouts as <id>.png, and scores them with the
 * corpus's evaluate.mjs (found beside the corpus directory, or given with --evaluator). Prints the
 * per-tag means and the summary line, with the time per image. Not part of `npm test`: the
 * corpus lives outside the repository.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import sharp from 'sharp';
import { createPipeline } from '../dist/pipeline/index.js';
import type { RemoveRequest } from '../dist/pipeline/types.js';
import { CutoutError } from '../dist/errors.js';
import { edgeParamsOf } from '../dist/pipeline/edges.js';
import { option } from './common.js';

const args = process.argv.slice(2);
const VALUED = new Set(['--out', '--model', '--quality', '--evaluator', '--edge-params', '--precision']);
const positional = args.filter((a, i) => !a.startsWith('--') && !VALUED.has(args[i - 1] ?? ''));
const corpus = positional[0];
if (!corpus) {
  process.stderr.write('usage: npm run bench:quality -- <corpus-dir> [--out DIR] [--model NAME] [--no-refine] [--no-decontaminate] [--quality Q] [--precision P]\n');
  process.exit(2);
}
const modelName = option(args, '--model') ?? 'isnet-medium';
const outDir = option(args, '--out') ?? fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-quality-'));
const evaluator = option(args, '--evaluator') ?? path.join(path.dirname(path.resolve(corpus)), 'evaluate.mjs');
if (!fs.existsSync(evaluator)) {
  process.stderr.write(`evaluator not found: ${evaluator} (give --evaluator FILE)\n`);
  process.exit(2);
}

interface ManifestEntry { id: string; image: string }
const manifest = JSON.parse(fs.readFileSync(path.join(corpus, 'manifest.json'), 'utf8')) as { images: ManifestEntry[] };

const request: RemoveRequest & Record<string, unknown> = {
  size: 'full',
  format: 'png',
  bgColor: null,
  crop: false,
  refine: !args.includes('--no-refine'),
  decontaminate: !args.includes('--no-decontaminate'),
};
const quality = option(args, '--quality');
if (quality) request.quality = quality as RemoveRequest['quality'];
const precision = option(args, '--precision');
if (precision) request.precision = precision as RemoveRequest['precision'];

// Compare refinement settings without editing code: --edge-params '{"guidedRadius":4}'.
const edgeParams = option(args, '--edge-params');
if (edgeParams) request.edgeParams = JSON.parse(edgeParams) as RemoveRequest['edgeParams'];
fs.mkdirSync(outDir, { recursive: true });
const pipeline = createPipeline({ model: modelName });
await pipeline.loadModel({ quality: request.quality, precision: request.precision });
let totalMs = 0;
let noSubject = 0;
const started = performance.now();
for (const entry of manifest.images) {
  const bytes = fs.readFileSync(path.join(corpus, entry.image));
  const file = path.join(outDir, `${entry.id}.png`);
  try {
    const r = await pipeline.removeBackground(bytes, request);
    totalMs += r.ms;
    fs.writeFileSync(file, r.data);
  } catch (err) {
    if (!(err instanceof CutoutError) || err.code !== 'no_subject_detected') throw err;
    // The right answer for an empty image: an empty matte of the same size.
    noSubject++;
    const meta = await sharp(bytes).metadata();
    await sharp({ create: { width: meta.width!, height: meta.height!, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } }).png().toFile(file);
  }
}
await pipeline.close();
const wall = performance.now() - started;

const jsonFile = path.join(outDir, 'scores.json');
const ev = spawnSync(process.execPath, [evaluator, corpus, outDir, '--json', jsonFile], { encoding: 'utf8', maxBuffer: 16 << 20 });
if (ev.status !== 0) {
  process.stderr.write(ev.stderr);
  process.exit(1);
}
const lines = ev.stdout.trim().split('\n');
const tagStart = lines.findIndex((l) => l.startsWith('per tag:'));
const settings = `model=${modelName}${precision ? ` precision=${precision}` : ''} refine=${request.refine} decontaminate=${request.decontaminate}${quality ? ` quality=${quality}` : ''} edge=${JSON.stringify(edgeParamsOf(request.edgeParams))}`;
process.stdout.write(`${settings}\n`);
process.stdout.write(lines.slice(tagStart).join('\n') + '\n');
process.stdout.write(`images=${manifest.images.length} no_subject_detected=${noSubject} pipeline_ms_per_image=${(totalMs / Math.max(1, manifest.images.length - noSubject)).toFixed(0)} wall_s=${(wall / 1000).toFixed(1)} out=${outDir}\n`);
const summary = JSON.parse(fs.readFileSync(jsonFile, 'utf8')).summary;
process.stdout.write(JSON.stringify({ bench: 'quality', settings, ...summary, ms_per_image: Math.round(totalMs / Math.max(1, manifest.images.length - noSubject)) }) + '\n');
