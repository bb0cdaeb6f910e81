/**
 * The parts of `npm run bench` for issue 17: fp32 against int8 in one process, the CLI's cold
 * start in child processes and where it goes, the CPU memory arena's effect, the CPU's features.
 * Timing on these shared machines is noisy: every comparison is interleaved or alternated, and
 * the ratios, not the absolute times, are what to read.
 */
import type { CutoutPipeline } from '../dist/pipeline/index.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { RemoveRequest } from '../dist/pipeline/types.js';
import { cpuFlags, hasVnni } from '../dist/toolchain/int8.js';
import { BIN, median } from './common.js';

/**
 * This process's own peak resident memory (VmHWM). Not getrusage's maxRSS: Linux carries that
 * over fork and exec, so a child spawned by a bench holding 2 GB would report the bench's size.
 */
export const peakRssMb = () => {
  try {
    const kb = /^VmHWM:\s+(\d+) kB$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1];
    if (kb) return Math.round(Number(kb) / 1024);
  } catch {
    // Not Linux.
  }
  return Math.round(process.resourceUsage().maxRSS / 1024);
};

/** This process's anonymous memory on transparent huge pages now (smaps_rollup), in MB; null where unknown. */
export const anonHugeMb = (): number | null => {
  try {
    const kb = /^AnonHugePages:\s+(\d+) kB$/m.exec(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'))?.[1];
    return kb ? Math.round(Number(kb) / 1024) : null;
  } catch {
    return null;
  }
};

/** The CPU's name and the features that decide int8's speed. */
export function cpuFeatures(): string {
  const flags = cpuFlags();
  const name = os.cpus()[0]?.model ?? 'unknown CPU';
  const seen = flags ? ['avx2', 'avx512f', 'avx512_vnni', 'avx_vnni', 'amx_int8'].filter((f) => flags.includes(f)) : [];
  return `${name}, ${os.cpus().length} cores, flags ${flags ? seen.join(' ') || 'none of avx2/avx512/vnni' : 'unknown'}; VNNI ${hasVnni(flags) ? 'yes' : 'no'}`;
}

export async function rawRun(pipeline: CutoutPipeline, precision: 'fp32' | 'int8'): Promise<number> {
  const { rgbToTensor } = await import('../dist/pipeline/matte.js');
  const { width, height, mean, std } = pipeline.manifest.input;
  const rgb = new Uint8Array(width * height * 3).map((_, i) => (i * 37) & 255);
  const tensor = rgbToTensor(rgb, width, height, mean, std);
  const t = performance.now();
  await pipeline.runModel(tensor, width, height, { precision });
  return performance.now() - t;
}

/**
 * fp32 and int8 side by side: for every image, a raw session run and an end-to-end cutout at
 * each precision, the order swapped on every image so neither always runs second.
 */
export async function comparePrecisions(pipeline: CutoutPipeline, buffers: Buffer[], files: string[], request: RemoveRequest, runs: number) {
  const precisions = ['fp32', 'int8'] as const;
  for (const p of precisions) {
    await pipeline.loadModel({ precision: p });
    await rawRun(pipeline, p); // the first run of a session allocates; not timed
  }
  const raw = { fp32: [] as number[], int8: [] as number[] };
  const e2e = { fp32: [] as number[], int8: [] as number[] };
  let k = 0;
  for (let r = 0; r < Math.max(2, runs); r++) {
    for (const b of buffers) {
      const order = k++ % 2 ? [...precisions].reverse() : precisions;
      for (const p of order) raw[p].push(await rawRun(pipeline, p));
      for (const p of order) e2e[p].push((await pipeline.removeBackground(b, { ...request, precision: p })).ms);
    }
  }
  const json = {
    samples: raw.fp32.length,
    raw_ms: { fp32: Math.round(median(raw.fp32)), int8: Math.round(median(raw.int8)) },
    end_to_end_ms: { fp32: Math.round(median(e2e.fp32)), int8: Math.round(median(e2e.int8)) },
    raw_ratio: +(median(raw.int8) / median(raw.fp32)).toFixed(3),
    end_to_end_ratio: +(median(e2e.int8) / median(e2e.fp32)).toFixed(3),
  };
  const text =
    `\nprecision, ${files.length} image(s) x ${Math.max(2, runs)} run(s), interleaved, medians:\n` +
    `precision  raw-run-ms  end-to-end-ms\n` +
    `fp32       ${String(json.raw_ms.fp32).padStart(10)}  ${String(json.end_to_end_ms.fp32).padStart(13)}\n` +
    `int8       ${String(json.raw_ms.int8).padStart(10)}  ${String(json.end_to_end_ms.int8).padStart(13)}\n` +
    `int8 / fp32: raw ${json.raw_ratio}, end to end ${json.end_to_end_ratio}\n`;
  return { json, text };
}

function wallMs(args: string[], env: Record<string, string> = {}, cwd?: string): number {
  const t = performance.now();
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, cwd });
  if (r.status !== 0) throw new Error(`cutout ${args.join(' ')} failed: ${r.stderr}`);
  return performance.now() - t;
}

/** The environment variables that would override a CLI default: removed for the defaults' runs. */
const DEFAULT_OVERRIDES = ['CUTOUT_PRECISION', 'CUTOUT_QUALITY', 'CUTOUT_MODEL', 'CUTOUT_UPSTREAM', 'CUTOUT_ARENA'];

/**
 * A folder through the CLI, process start to last output written, with the defaults before
 * issue 17 (`--precision fp32 -c 2`) against today's (no flags: `auto` precision, concurrency 2 on two cores).
 * Each fixture is copied `copies` times (the issue measured a folder of six photos); the two
 * commands alternate, the order swapped each pass, three passes each; medians of images/s.
 */
export function folderDefaults(files: string[], model: string, copies = 2) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-folder-'));
  try {
    const input = path.join(dir, 'in');
    fs.mkdirSync(input);
    let n = 0;
    for (let c = 0; c < copies; c++) for (const f of files) fs.copyFileSync(f, path.join(input, `${c}-${path.basename(f)}`)), n++;
    const env: Record<string, string> = Object.fromEntries(Object.entries(process.env).filter(([k]) => !DEFAULT_OVERRIDES.includes(k)) as [string, string][]);
    const common = [input, '--model', model, '--data', path.join(dir, 'data'), '--overwrite', '-q'];
    const commands = { old: [...common, '--out', path.join(dir, 'old'), '--precision', 'fp32', '-c', '2'], now: [...common, '--out', path.join(dir, 'now')] };
    // Run from the temporary folder so no configuration file of the caller's folder applies.
    const run = (args: string[]) => {
      const t = performance.now();
      const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env, cwd: dir });
      if (r.status !== 0) throw new Error(`cutout ${args.join(' ')} failed: ${r.stderr}`);
      return n / ((performance.now() - t) / 1000);
    };
    const samples = { old: [] as number[], now: [] as number[] };
    for (let pass = 0; pass < 3; pass++) for (const k of pass % 2 ? (['now', 'old'] as const) : (['old', 'now'] as const)) samples[k].push(run(commands[k]));
    const json = {
      images: n,
      old_defaults_img_per_s: +median(samples.old).toFixed(3), new_defaults_img_per_s: +median(samples.now).toFixed(3),
      ratio: +(median(samples.now) / median(samples.old)).toFixed(3),
      passes: { old: samples.old.map((x) => +x.toFixed(3)), now: samples.now.map((x) => +x.toFixed(3)) },
    };
    const text =
      `\nfolder through the CLI (${n} images, process start to last output, 3 alternated passes, medians): ` +
      `old defaults (--precision fp32 -c 2) ${json.old_defaults_img_per_s} img/s, new defaults (no flags) ${json.new_defaults_img_per_s} img/s, ` +
      `new / old = ${json.ratio} (passes ${json.passes.old.join(', ')} and ${json.passes.now.join(', ')})\n`;
    return { json, text };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The CLI's cold start: `cutout photo` from process start to output written (median of 3),
 * against the marginal cost of a further photo in the same process (two photos at concurrency 1
 * minus one), per precision; and the first image's split from a child that times each phase.
 */
export function coldStart(photo: string, model: string) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-cold-'));
  try {
    const ext = path.extname(photo);
    const a = path.join(dir, `a${ext}`);
    const b = path.join(dir, `b${ext}`);
    fs.copyFileSync(photo, a);
    fs.copyFileSync(photo, b);
    const common = ['--model', model, '--data', path.join(dir, 'data'), '-c', '1', '--overwrite', '-q'];
    const rows: Record<string, { one_ms: number; two_ms: number; marginal_ms: number; first_extra_ms: number }> = {};
    for (const precision of ['fp32', 'int8']) {
      const one: number[] = [];
      const two: number[] = [];
      for (let i = 0; i < 3; i++) {
        one.push(wallMs([a, '--out', path.join(dir, 'a.png'), '--precision', precision, ...common]));
        two.push(wallMs([a, b, '--precision', precision, ...common]));
      }
      const marginal = median(two) - median(one);
      rows[precision] = { one_ms: Math.round(median(one)), two_ms: Math.round(median(two)), marginal_ms: Math.round(marginal), first_extra_ms: Math.round(median(one) - marginal) };
    }
    const split = (precision: 'fp32' | 'int8', env: Record<string, string> = {}) => {
      // Its own entry file, which imports nothing at the top, so module loading is timed too.
      const entry = fileURLToPath(new URL('./cold-split.js', import.meta.url));
      const r = spawnSync(process.execPath, [entry, a, model, precision], { encoding: 'utf8', env: { ...process.env, ...env } });
      if (r.status !== 0) throw new Error(`cold split failed: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, number>;
    };
    // Three children per precision, alternated; each key's median (one child swung by 0.3 s here).
    const runsOf: Record<'fp32' | 'int8', Record<string, number>[]> = { fp32: [], int8: [] };
    for (let i = 0; i < 3; i++) for (const p of ['fp32', 'int8'] as const) runsOf[p].push(split(p));
    const medianOf = (xs: Record<string, number>[]) => Object.fromEntries(Object.keys(xs[0]).map((k) => [k, Math.round(median(xs.map((x) => x[k])))]));
    const cached = medianOf(runsOf.fp32);
    const int8 = medianOf(runsOf.int8);
    const uncached = split('fp32', { CUTOUT_ORT_CACHE: '0' });
    // Node's own start, which no code of ours runs: an empty script, median of 3.
    const nodeAlone = median([0, 1, 2].map(() => {
      const t = performance.now();
      spawnSync(process.execPath, ['-e', '0']);
      return performance.now() - t;
    }));
    const aim = coldStartAim(rows, nodeAlone, { fp32: cached, int8 });
    const json = { cli: rows, split: cached, split_without_ort_cache: uncached, split_int8: int8, node_alone_ms: Math.round(nodeAlone), aim: aim.json };
    let text = `\ncold start (CLI in a child process, one ${path.basename(photo)}, medians of 3; marginal = two photos at -c 1 minus one):\n`;
    text += 'precision  one-photo-ms  two-photos-ms  marginal-ms  first-image-extra-ms\n';
    for (const [p, r] of Object.entries(rows)) text += `${p.padEnd(9)}  ${String(r.one_ms).padStart(12)}  ${String(r.two_ms).padStart(13)}  ${String(r.marginal_ms).padStart(11)}  ${String(r.first_extra_ms).padStart(20)}\n`;
    text += `first image's split (fp32, medians of 3 children; node_start_ms since process start): ${JSON.stringify(cached)}\n`;
    text += `the same without onnxruntime's saved optimised model: ${JSON.stringify(uncached)}\n`;
    text += `the same at int8 (medians of 3): ${JSON.stringify(int8)}\n`;
    text += aim.text;
    return { json, text };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Issue 27's aim: a first image at most this much dearer than a further one, at each precision. */
const COLD_AIM_MS = 250;

/**
 * The cold-start aim against its floor: node's own start (an empty script) and the first session
 * run's extra time over a second run (memory the run touches for the first time: the page faults),
 * neither of which the pipeline's code runs.
 */
function coldStartAim(rows: Record<string, { first_extra_ms: number }>, nodeAlone: number, splits: Record<'fp32' | 'int8', Record<string, number>>) {
  const json: Record<string, { first_extra_ms: number; met: boolean; floor_ms: number; first_run_extra_ms: number; extra_minor_faults: number }> = {};
  let text = `aim (issue 27): a first image at most ${COLD_AIM_MS} ms dearer than a further one; node alone (node -e 0) ${Math.round(nodeAlone)} ms\n`;
  for (const p of ['fp32', 'int8'] as const) {
    const s = splits[p];
    const firstRunExtra = s.first_inference_ms - s.second_inference_ms; // of the medians
    const floor = Math.round(nodeAlone + firstRunExtra);
    json[p] = { first_extra_ms: rows[p].first_extra_ms, met: rows[p].first_extra_ms <= COLD_AIM_MS, floor_ms: floor, first_run_extra_ms: firstRunExtra, extra_minor_faults: s.first_image_minor_faults - s.second_image_minor_faults };
    text += `  ${p}: first image ${rows[p].first_extra_ms} ms dearer: ${json[p].met ? 'met' : 'not met'}; floor ${floor} ms = node alone + the first session run's extra ${firstRunExtra} ms (${json[p].extra_minor_faults} more minor page faults than the second image)\n`;
  }
  return { json, text };
}

/** Child mode (cold-split.ts): the phases of a first image at `precision`, each timed, then a second run of the same image. */
export async function coldSplit(photo: string, model: string, atStart: number, precision: 'fp32' | 'int8' = 'fp32'): Promise<void> {
  let t = performance.now();
  const { createPipeline } = await import('../dist/pipeline/index.js');
  const { ensureModelAt } = await import('../dist/toolchain/weights.js');
  const modules = performance.now() - t;
  const pipeline = createPipeline({ model, precision });
  const manifest = pipeline.manifest;
  t = performance.now();
  await ensureModelAt(manifest, manifest.input.width, precision);
  const checksum = performance.now() - t;
  t = performance.now();
  await pipeline.loadModel();
  const session = performance.now() - t;
  const bytes = fs.readFileSync(photo);
  const request = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false, precision };
  // Minor page faults of the whole process per image: memory touched for the first time (the
  // session's working memory, which its arena keeps after the first run).
  const faults = () => process.resourceUsage().minorPageFault;
  // The kernel's CPU time of the whole process per image (all threads): the page faults' cost,
  // which huge pages change (docs/internals.md, "Huge pages"), steadier under load than wall time.
  const systemMs = () => process.resourceUsage().systemCPUTime / 1000;
  let f = faults();
  let sys = systemMs();
  t = performance.now();
  const first = await pipeline.removeBackground(bytes, request);
  const firstMs = performance.now() - t;
  const firstFaults = faults() - f;
  const firstSys = systemMs() - sys;
  f = faults();
  sys = systemMs();
  t = performance.now();
  const second = await pipeline.removeBackground(bytes, request);
  const secondMs = performance.now() - t;
  const secondFaults = faults() - f;
  const secondSys = systemMs() - sys;
  process.stdout.write(JSON.stringify({
    node_start_ms: Math.round(atStart), modules_ms: Math.round(modules), checksum_ms: Math.round(checksum), session_ms: Math.round(session),
    first_image_ms: Math.round(firstMs), first_inference_ms: Math.round(first.timings.inference), second_image_ms: Math.round(secondMs), second_inference_ms: Math.round(second.timings.inference),
    first_postprocess_ms: Math.round(first.timings.postprocess), second_postprocess_ms: Math.round(second.timings.postprocess),
    first_image_minor_faults: firstFaults, second_image_minor_faults: secondFaults,
    first_image_system_ms: Math.round(firstSys), second_image_system_ms: Math.round(secondSys), peak_rss_mb: peakRssMb(), anon_huge_mb: anonHugeMb(),
  }) + '\n');
  await pipeline.close();
}

/** Child mode: `n` raw fp32 runs after one untimed run; prints the median and the peak RSS. */
export async function rawRuns(model: string, n: number): Promise<void> {
  const { createPipeline } = await import('../dist/pipeline/index.js');
  const pipeline = createPipeline({ model, precision: 'fp32' });
  await pipeline.loadModel();
  await rawRun(pipeline, 'fp32');
  const times: number[] = [];
  for (let i = 0; i < n; i++) times.push(await rawRun(pipeline, 'fp32'));
  process.stdout.write(JSON.stringify({ median_ms: Math.round(median(times)), peak_rss_mb: peakRssMb() }) + '\n');
  await pipeline.close();
}

/** The arena's effect on the fp32 raw run (1024 x 1024 tensor): children with it off and on, alternated twice. */
export function arenaEffect(benchScript: string, model: string) {
  const results: Record<'off' | 'on', { median_ms: number; peak_rss_mb: number }[]> = { off: [], on: [] };
  for (let i = 0; i < 2; i++) {
    for (const [label, value] of [['off', '0'], ['on', '1']] as const) {
      const r = spawnSync(process.execPath, [benchScript, '--raw-runs', '3', '--model', model], { encoding: 'utf8', env: { ...process.env, CUTOUT_ARENA: value } });
      if (r.status !== 0) throw new Error(`arena child failed: ${r.stderr}`);
      results[label].push(JSON.parse(r.stdout.trim().split('\n').pop()!));
    }
  }
  const json = {
    off_ms: results.off.map((x) => x.median_ms), on_ms: results.on.map((x) => x.median_ms),
    off_peak_rss_mb: Math.max(...results.off.map((x) => x.peak_rss_mb)), on_peak_rss_mb: Math.max(...results.on.map((x) => x.peak_rss_mb)),
  };
  const text = `\nCPU arena (fp32 raw run, median of 3 per child, two children each, alternated): off ${json.off_ms.join(', ')} ms (peak RSS ${json.off_peak_rss_mb} MB), on ${json.on_ms.join(', ')} ms (peak RSS ${json.on_peak_rss_mb} MB)\n`;
  return { json, text };
}
