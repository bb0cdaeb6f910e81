/**
 * `npm run bench -- [dir] [--large] [--runs N] [--qualities fast,balanced,best] [--upstream URL]`: per-stage time of the pipeline on a folder of
 * images (default: test/fixtures), images per second at concurrency 1 and 2, peak RSS, and beside
 * them the raw session run on the same tensor, so the pipeline's overhead ratio is visible.
 * `--precision fp32|int8` sets the number format of the main rows and the large images (default `auto`).
 * `--large` adds 12 MP and 50 MP inputs (the first image enlarged), each measured in its own child process so the
 * peak RSS belongs to that image alone, and a folder of four 12 MP copies at concurrency 1 and 2. Then each quality setting side by side (median time per
 * image, interleaved per image). Then (issue 17) fp32 against int8, interleaved in one process (raw
 * session run and end to end), the cold start of the CLI in child processes (first image against a
 * further one, and where the first one's extra time goes), a folder through the CLI with the old
 * defaults (fp32, concurrency 2) against today's, the arena's effect on the raw run, and the CPU
 * features seen. `--no-precision`, `--no-cold` skip those parts; `--folder-defaults` runs only the
 * folder row, `--cold-start` only the cold-start rows (with huge pages on and off, issue 38; `--hugepages-only` those alone, `--hugepages-steady` the steady state's alone, `--no-hugepages` without), `--large-only` only the large rows (with issue 27's aims and floors). Prints a table, then one JSON line.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import pLimit from 'p-limit';
import { createPipeline, resolveModel } from '../dist/pipeline/index.js';
import { rgbToTensor } from '../dist/pipeline/matte.js';
import { modelSide } from '../dist/toolchain/variants.js';
import { PRECISIONS, QUALITIES, parseEnum, type Quality } from '../dist/options.js';
import type { StageTimings } from '../dist/pipeline/types.js';
import { IMAGE_EXTENSIONS } from '../dist/commands/inputs.js';
import { comparePrecisions, coldStart, arenaEffect, rawRuns, cpuFeatures, folderDefaults } from './speed-precision.js';
import { coldHugePages, steadyHugePages } from './hugepages.js';
import { ROOT, median, option } from './common.js';

const args = process.argv.slice(2);
const flag = (name: string) => args.includes(name);
// --help says the usage instead of being ignored: the whole bench takes minutes of every core.
if (flag('--help') || flag('-h')) {
  process.stdout.write('npm run bench -- [dir] [--large] [--runs N] [--qualities fast,balanced,best] [--model NAME] [--upstream URL] [--removebg] [--dialects]\n'
    + '  [--precision fp32|int8] [--no-precision] [--no-cold] [--folder-defaults] [--cold-start] [--large-only] [--split]\n'
    + '  [--hugepages-only] [--hugepages-steady] [--no-hugepages] [--rounds-huge N] [--pause MS] [--children-huge N]   (see the header of bench/speed.ts and docs/benchmarks.md, "Benchmarks")\n');
  process.exit(0);
}
const modelName = option(args, '--model', 'isnet-medium');
const runs = Number(option(args, '--runs', '1'));
/** `--qualities fast,balanced,best`: the settings compared side by side (default: all). */
const qualities = option(args, '--qualities', QUALITIES.join(',')).split(',').map((q) => parseEnum('qualities', QUALITIES, q, 'cli'));
const REQUEST = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false };
/** `--precision fp32|int8`: the number format of the main rows and the large images (default: what `auto` picks here). */
const precisionFlag = args.includes('--precision') ? parseEnum('precision', PRECISIONS, option(args, '--precision', 'auto'), 'cli') : undefined;
/** The bench's one pipeline (its worker thread starts with the first model call). */
const pipeline = createPipeline({ model: modelName, precision: precisionFlag });

/** The precisions the huge-page rows compare: `--precision` alone, else both. */
const hugePagePrecisions = (): ('fp32' | 'int8')[] => (precisionFlag === 'fp32' || precisionFlag === 'int8' ? [precisionFlag] : ['fp32', 'int8']);
/** Huge pages on and off for the first image (`--rounds-huge N`, default 3; `--pause MS`, default 3000: see hugepages.ts). */
const hugePagesCold = (photo: string) =>
  coldHugePages(photo, modelName, { rounds: Number(option(args, '--rounds-huge', '3')), pauseMs: Number(option(args, '--pause', '3000')), precisions: hugePagePrecisions() });
/** Huge pages on and off in the steady state: two children per mode and precision, three passes each. */
const hugePagesSteady = (files: string[]) => steadyHugePages(files, modelName, { children: Number(option(args, '--children-huge', '2')), passes: 3, precisions: hugePagePrecisions() });

/** Interleaved repetitions per large image: medians of five, as the machine is noisy. */
const REPEATS = 5;

const maxRssMb = () => Math.round(process.resourceUsage().maxRSS / 1024);

/**
 * Child mode: one image, after a warm-up of the session. Raw runs and pipeline runs alternate so
 * that both see the same machine load; medians of three of each.
 */
async function single(file: string): Promise<void> {
  await pipeline.loadModel();
  const bytes = fs.readFileSync(file);
  const raws: number[] = [];
  // Only the figures of each run are kept: holding the results' encoded bytes (tens of MB each at
  // 50 MP) would add the bench's own memory to the peak RSS it reports.
  type RunFigures = Pick<Awaited<ReturnType<typeof pipeline.removeBackground>>, 'ms' | 'width' | 'height' | 'timings'>;
  const figures = ({ ms, width, height, timings }: RunFigures): RunFigures => ({ ms, width, height, timings });
  const totals: { ms: number; r: RunFigures }[] = [];
  // The same image without refinement and decontamination: what the edge work costs at this size.
  const plain: number[] = [];
  const plainPost: number[] = [];
  // The peak of one image, then of the repeated runs (a long-running process settles higher: the
  // malloc arenas of the worker and libuv threads fragment over runs).
  const first = figures(await pipeline.removeBackground(bytes, REQUEST));
  const firstPeak = maxRssMb();
  totals.push({ ms: first.ms, r: first });
  for (let i = 0; i < REPEATS; i++) {
    raws.push(await rawInference());
    const r = await pipeline.removeBackground(bytes, REQUEST);
    totals.push({ ms: r.ms, r: figures(r) });
    const p = await pipeline.removeBackground(bytes, { ...REQUEST, refine: false, decontaminate: false });
    plain.push(p.ms);
    plainPost.push(p.timings.postprocess);
  }
  raws.sort((a, b) => a - b);
  plain.sort((a, b) => a - b);
  plainPost.sort((a, b) => a - b);
  const mid = (xs: unknown[]) => Math.floor(xs.length / 2);
  // The edge work is the postprocess stage's difference: totals swing with inference time.
  const posts = totals.map((x) => x.r.timings.postprocess).sort((a, b) => a - b);
  const edgeMs = posts[mid(posts)] - plainPost[mid(plainPost)];
  totals.sort((a, b) => a.ms - b.ms);
  const median = totals[mid(totals)].r;
  const peak = maxRssMb();
  // A folder of such images (four copies) at concurrency 1 and 2: whether the decode, matte and
  // encode of one image overlap the next one's inference. Measured after the peak above, since two
  // images in flight hold two images' buffers.
  const folder: Record<string, number> = {};
  if (flag('--folder')) {
    for (const c of [1, 2]) {
      const limit = pLimit(c);
      const t = performance.now();
      await Promise.all([0, 1, 2, 3].map(() => limit(async () => void (await pipeline.removeBackground(bytes, REQUEST)))));
      folder[`folder_img_per_s_c${c}`] = +(4 / ((performance.now() - t) / 1000)).toFixed(3);
    }
  }
  process.stdout.write(JSON.stringify({ file, width: median.width, height: median.height, ms: median.ms, timings: median.timings, raw_inference_ms: raws[mid(raws)], plain_ms: plain[mid(plain)], edge_ms: Math.round(edgeMs), runs: 1 + 2 * REPEATS, first_image_peak_rss_mb: firstPeak, peak_rss_mb: peak, ...folder }) + '\n');
  await pipeline.close();
}

/** The session run alone on a prepared tensor: the floor the pipeline is compared with. */
async function rawInference(): Promise<number> {
  const manifest = resolveModel(modelName);
  const { width, height, mean, std } = manifest.input;
  const rgb = new Uint8Array(width * height * 3).map((_, i) => (i * 37) & 255);
  const tensor = rgbToTensor(rgb, width, height, mean, std);
  const t = performance.now();
  await pipeline.runModel(tensor, width, height);
  return performance.now() - t;
}

function listImages(dir: string): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => IMAGE_EXTENSIONS.includes(path.extname(f).toLowerCase()) && !f.includes('.cutout.'))
    .sort()
    .map((f) => path.join(dir, f));
}

const fmt = (n: number) => n.toFixed(0).padStart(7);

interface LargeRow {
  label: '12mp' | '50mp'; width: number; height: number; ms: number; raw_inference_ms: number; plain_ms: number; edge_ms: number; runs: number;
  first_image_peak_rss_mb: number; peak_rss_mb: number; timings: StageTimings; folder_img_per_s_c1?: number; folder_img_per_s_c2?: number;
}

/** Issue 27's aims for large photos (at int8): end to end within this multiple of the raw run, and a 50 MP image's peak RSS. */
const LARGE_AIMS = { ratio: { '12mp': 1.2, '50mp': 1.5 }, peakRssMb50: 1500 } as const;

/** The first image enlarged to 12 and 50 MP, each measured in its own child process (so the peak RSS is that image's alone). */
async function benchLarge(source: string): Promise<LargeRow[]> {
  const rows: LargeRow[] = [];
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-'));
  try {
    for (const [label, w, h] of [['12mp', 4000, 3000], ['50mp', 8160, 6120]] as const) {
      const file = path.join(tmp, `${label}.jpg`);
      await sharp(source).resize(w, h, { fit: 'fill' }).jpeg({ quality: 90 }).toFile(file);
      const childArgs = [fileURLToPath(import.meta.url), '--one', file, '--model', modelName, ...(precisionFlag ? ['--precision', precisionFlag] : []), ...(label === '12mp' ? ['--folder'] : [])];
      const child = spawnSync(process.execPath, childArgs, { encoding: 'utf8', maxBuffer: 1 << 20 });
      if (child.status !== 0) throw new Error(`bench child failed for ${label}: ${child.stderr}`);
      rows.push({ label, ...JSON.parse(child.stdout.trim().split('\n').pop()!) });
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return rows;
}

/**
 * The large rows, each with its aim and its floor: (raw run + model input + encode) / raw run.
 * The model input must exist before the run and the encode needs the matte after it, so neither
 * overlaps the run of the same image, however fast the rest becomes.
 */
function largeText(rows: LargeRow[]): string {
  let text = '';
  for (const l of rows) {
    const t = l.timings;
    const ratio = l.ms / l.raw_inference_ms;
    const floor = (l.raw_inference_ms + t.preprocess + t.encode) / l.raw_inference_ms;
    const aim = LARGE_AIMS.ratio[l.label];
    text += `${l.label}: ${l.width}x${l.height} total ${l.ms} ms, raw run ${l.raw_inference_ms.toFixed(0)} ms, ratio ${ratio.toFixed(3)}, outside inference ${Math.round(l.ms - t.inference)} ms (ratio ${((l.raw_inference_ms + l.ms - t.inference) / l.raw_inference_ms).toFixed(3)}), without refinement ${l.plain_ms} ms (edge work ${l.edge_ms} ms, +${(100 * l.edge_ms / l.plain_ms).toFixed(1)} %), peak RSS ${l.first_image_peak_rss_mb} MB for one image, ${l.peak_rss_mb} MB after ${l.runs} runs, stages ${JSON.stringify(Object.fromEntries(Object.entries(t).map(([k, v]) => [k, Math.round(v)])))}${l.folder_img_per_s_c1 ? `; a folder of four: ${l.folder_img_per_s_c1} img/s at concurrency 1, ${l.folder_img_per_s_c2} at 2` : ''}\n`;
    text += `  aim (issue 27, at int8): ratio <= ${aim}${l.label === '50mp' ? `, peak RSS < ${LARGE_AIMS.peakRssMb50} MB` : ''}: ${ratio <= aim && (l.label !== '50mp' || l.peak_rss_mb < LARGE_AIMS.peakRssMb50) ? 'met' : 'not met'}; floor (raw + model input ${Math.round(t.preprocess)} ms + encode ${Math.round(t.encode)} ms) / raw = ${floor.toFixed(3)}\n`;
  }
  return text;
}

/** The child processes the other rows start (each measures in a process of its own): true when this is one. */
async function runChildMode(): Promise<boolean> {
  if (args[0] === '--one') await single(args[1]);
  // `--upstream URL`: the model over the Open Inference Protocol, binary against JSON (upstream.ts).
  else if (flag('--upstream')) await (await import('./upstream.js')).benchUpstream(args);
  // `--removebg`: remove.bg's dialect against the native /remove on one server (removebg.ts).
  else if (flag('--removebg')) await (await import('./removebg.js')).benchRemoveBg(args);
  // `--dialects`: every dialect (remove.bg, rembg, Photoroom, Clipdrop) against the native /remove (dialects.ts).
  else if (flag('--dialects')) await (await import('./dialects.js')).benchDialects(args);
  else if (args[0] === '--raw-runs') await rawRuns(modelName, Number(args[1]));
  else if (args[0] === '--steady-child') await (await import('./hugepages.js')).steadyChild(args[1], args[2] === 'int8' ? 'int8' : 'fp32', Number(args[3]), args.slice(4));
  else if (args[0] === '--split-memory-child') await (await import('./split.js')).memoryChild(args[1], Number(args[2]), modelName);
  else return false;
  return true;
}

/**
 * One row alone, printed with the CPU and its JSON line: true when one was asked for.
 * `--split`: the inference split (1 x cores against cores x 1) and what one more worker costs;
 * `--large-only`: the 12 and 50 MP rows with their aims and floors; `--hugepages-only` and
 * `--hugepages-steady` (issue 38); `--folder-defaults` and `--cold-start` (issue 17's targets).
 */
async function runAloneRow(files: string[]): Promise<boolean> {
  const print = (text: string, { bench, ...json }: Record<string, unknown>) => process.stdout.write(`CPU: ${cpuFeatures()}\n${text}${JSON.stringify({ bench, cpu: cpuFeatures(), ...json })}\n`);
  if (flag('--split')) {
    const { benchSplit, benchSplitMemory } = await import('./split.js');
    const split = await benchSplit(files, modelName);
    const memory = benchSplitMemory(files[0], modelName);
    print(split.text + memory.text, { bench: 'split', ...split.json, memory: memory.json });
  } else if (flag('--large-only')) {
    const rows = await benchLarge(files[0]);
    print(`precision ${precisionFlag ?? 'auto'}\n${largeText(rows)}`, { bench: 'large', precision: precisionFlag ?? 'auto', large: rows });
  } else if (flag('--hugepages-only') || flag('--hugepages-steady')) {
    const row = flag('--hugepages-only') ? hugePagesCold(files[0]) : hugePagesSteady(files);
    print(row.text, { bench: 'hugepages', ...row.json });
  } else if (flag('--folder-defaults')) {
    const row = folderDefaults(files, modelName);
    print(row.text, { bench: 'folder-defaults', ...row.json, hugepages: null });
  } else if (flag('--cold-start')) {
    const row = coldStart(files[0], modelName);
    const huge = flag('--no-hugepages') ? null : hugePagesCold(files[0]);
    print(row.text + (huge?.text ?? ''), { bench: 'cold-start', ...row.json, hugepages: huge?.json ?? null });
  } else return false;
  return true;
}

interface ImageRow { file: string; width: number; height: number; ms: number; raw: number; timings: StageTimings }

/**
 * The main rows: each image `runs` times, a raw session run before each (the pair sees the same
 * machine load, and the ratio of the sums is what we report: these machines are shared and
 * noisy), then the throughput at concurrency 1 and 2.
 */
async function steadyRows(files: string[], buffers: Buffer[]) {
  // One untimed pass: what is measured is a warm process (a folder, a server), not V8's first
  // compilation of the matte code, which costs tens of ms in the first images of a process.
  for (const b of buffers) await pipeline.removeBackground(b, REQUEST);
  const perImage: ImageRow[] = [];
  for (let r = 0; r < runs; r++) {
    for (let i = 0; i < files.length; i++) {
      const raw = await rawInference();
      const res = await pipeline.removeBackground(buffers[i], REQUEST);
      perImage.push({ file: path.basename(files[i]), width: res.width, height: res.height, ms: res.ms, raw, timings: res.timings });
    }
  }
  const average = (f: (p: ImageRow) => number) => perImage.reduce((s, p) => s + f(p), 0) / perImage.length;
  const stages = Object.fromEntries((['decode', 'preprocess', 'inference', 'postprocess', 'encode'] as const).map((k) => [k, average((p) => p.timings[k])])) as Record<keyof StageTimings, number>;
  return { perImage, raw: average((p) => p.raw), meanMs: average((p) => p.ms), stages, ...(await throughput(buffers)) };
}

/**
 * Concurrency 1 and 2 alternated three times (the order swapped each time), medians: a single
 * pass of each swung more than their difference on this shared machine. The CLI's default
 * concurrency is whichever wins here (config.ts).
 */
async function throughput(buffers: Buffer[]) {
  const samples: Record<'c1' | 'c2', number[]> = { c1: [], c2: [] };
  for (let rep = 0; rep < 3; rep++) {
    for (const c of rep % 2 ? [2, 1] : [1, 2]) {
      const limit = pLimit(c);
      const t = performance.now();
      await Promise.all(buffers.map((b) => limit(() => pipeline.removeBackground(b, REQUEST))));
      samples[c === 1 ? 'c1' : 'c2'].push(buffers.length / ((performance.now() - t) / 1000));
    }
  }
  return { samples, c1: median(samples.c1), c2: median(samples.c2) };
}

/**
 * Each quality setting side by side: for every image the settings run one after the other, so
 * all of them see the same machine load; medians per setting.
 */
async function qualityRows(buffers: Buffer[]) {
  const manifest = resolveModel(modelName);
  for (const q of qualities) await pipeline.loadModel({ quality: q });
  const perQuality = new Map<Quality, { ms: number[]; inference: number[]; missed: number }>(qualities.map((q) => [q, { ms: [], inference: [], missed: 0 }]));
  for (let r = 0; r < runs; r++) {
    for (const b of buffers) {
      for (const q of qualities) {
        // A subject missed at a small side is a result, not a bench failure: counted, not timed.
        const res = await pipeline.removeBackground(b, { ...REQUEST, quality: q }).catch((err: { code?: string }) => {
          if (err?.code !== 'no_subject_detected') throw err;
          perQuality.get(q)!.missed++;
          return null;
        });
        if (!res) continue;
        perQuality.get(q)!.ms.push(res.ms);
        perQuality.get(q)!.inference.push(res.timings.inference);
      }
    }
  }
  return qualities.map((q) => {
    const p = perQuality.get(q)!;
    return { quality: q, side: modelSide(manifest, q), median_ms: Math.round(median(p.ms)), mean_ms: Math.round(p.ms.reduce((s, x) => s + x, 0) / p.ms.length), median_inference_ms: Math.round(median(p.inference)), no_subject: p.missed };
  });
}

type Steady = Awaited<ReturnType<typeof steadyRows>>;
type QualityRow = Awaited<ReturnType<typeof qualityRows>>[number];

/** The main table: per image and stage, the overhead ratio, the throughput and the quality settings. */
function steadyText(dir: string, files: string[], loadMs: number, s: Steady, rows: QualityRow[]): string {
  let text = `model ${modelName}, ${files.length} image(s) from ${dir}, ${os.cpus().length} cores, session load ${loadMs.toFixed(0)} ms\n\n`;
  text += 'image                          size     total  decode   prep  infer   post  encode  raw-run\n';
  for (const p of s.perImage) {
    const t = p.timings;
    text += `${p.file.padEnd(28)} ${`${p.width}x${p.height}`.padStart(9)} ${fmt(p.ms)} ${fmt(t.decode)}${fmt(t.preprocess)}${fmt(t.inference)}${fmt(t.postprocess)}${fmt(t.encode)} ${fmt(p.raw)}\n`;
  }
  // The time outside the inference stage: a ratio that the inference's own swings do not move.
  const outside = s.meanMs - s.stages.inference;
  text += `\nmean per image ${s.meanMs.toFixed(0)} ms; mean raw session run ${s.raw.toFixed(0)} ms; end-to-end / raw = ${(s.meanMs / s.raw).toFixed(3)}; time outside inference ${outside.toFixed(0)} ms, (raw + that) / raw = ${((s.raw + outside) / s.raw).toFixed(3)}\n`;
  text += `throughput (median of 3 alternated passes): ${s.c1.toFixed(3)} img/s at concurrency 1, ${s.c2.toFixed(3)} img/s at concurrency 2 (passes: ${s.samples.c1.map((x) => x.toFixed(3)).join(', ')} and ${s.samples.c2.map((x) => x.toFixed(3)).join(', ')})\n`;
  text += `peak RSS ${maxRssMb()} MB\n`;
  text += `\nquality settings, ${files.length} image(s) x ${runs} run(s), interleaved:\nquality    side  median-ms  mean-ms  infer-ms  speed-up  no-subject\n`;
  const best = rows.find((r) => r.quality === 'best');
  for (const r of rows) {
    text += `${r.quality.padEnd(9)} ${String(r.side).padStart(5)} ${fmt(r.median_ms)}    ${fmt(r.mean_ms)}  ${fmt(r.median_inference_ms)}  ${(best ? (best.median_ms / r.median_ms).toFixed(2) + 'x' : '').padStart(8)}  ${r.no_subject}\n`;
  }
  return text;
}

async function main(): Promise<void> {
  if (await runChildMode()) return;
  const dir = args.find((a, i) => !a.startsWith('--') && !['--model', '--runs', '--qualities', '--precision', '--rounds-huge', '--pause', '--children-huge'].includes(args[i - 1] ?? '')) ?? path.join(ROOT, 'test', 'fixtures');
  const files = listImages(dir);
  if (!files.length) throw new Error(`no images in ${dir}`);
  if (await runAloneRow(files)) return;

  const loadMs = await pipeline.loadModel();
  const buffers = files.map((f) => fs.readFileSync(f));
  const steady = await steadyRows(files, buffers);
  const large = flag('--large') ? await benchLarge(files[0]) : [];
  const qualityTable = await qualityRows(buffers);
  const out = process.stdout;
  out.write(steadyText(dir, files, loadMs, steady, qualityTable));
  out.write(largeText(large));
  // The other parts, each skippable: fp32 against int8 in this process, then child processes.
  const precision = flag('--no-precision') ? null : await comparePrecisions(pipeline, buffers, files, REQUEST, runs);
  const cold = flag('--no-cold') ? null : coldStart(files[0], modelName);
  const defaults = flag('--no-cold') ? null : folderDefaults(files, modelName);
  const arena = flag('--no-cold') ? null : arenaEffect(fileURLToPath(import.meta.url), modelName);
  const hugeSteady = flag('--no-cold') || flag('--no-hugepages') ? null : hugePagesSteady(files);
  out.write(`\nCPU: ${cpuFeatures()}\n`);
  for (const part of [precision, cold, defaults, arena, hugeSteady]) if (part) out.write(part.text);
  out.write(
    JSON.stringify({
      bench: 'speed', model: modelName, images: files.length, mean_ms: Math.round(steady.meanMs), raw_inference_ms: Math.round(steady.raw), ratio: +(steady.meanMs / steady.raw).toFixed(3), outside_inference_ms: Math.round(steady.meanMs - steady.stages.inference),
      stages_ms: Object.fromEntries(Object.entries(steady.stages).map(([k, v]) => [k, Math.round(v)])), img_per_s_c1: +steady.c1.toFixed(3), img_per_s_c2: +steady.c2.toFixed(3),
      peak_rss_mb: maxRssMb(), large, qualities: qualityTable, cpu: cpuFeatures(), precision: precision?.json ?? null, cold: cold?.json ?? null, folder_defaults: defaults?.json ?? null, arena: arena?.json ?? null, hugepages_steady: hugeSteady?.json ?? null,
    }) + '\n',
  );
  await pipeline.close();
}

await main();
