/**
 * Huge pages on and off (issue 38), for `npm run bench -- --cold-start` (the first image) and
 * `npm run bench` (the steady state). Every comparison alternates on and off in one run, the order
 * swapped each round, and reports medians: the machines are shared and noisy.
 *
 * - The CLI: `cutout photo` and `cutout photo photo2` from process start to exit, with
 *   CUTOUT_HUGEPAGES=1 (the launcher starts node again with the tunable: its cost is counted) and
 *   CUTOUT_HUGEPAGES=0; the first image's extra = one photo - (two photos - one photo).
 * - The first image's split (cold-split.js) with GLIBC_TUNABLES set or not: first and further image,
 *   the model runs, minor page faults, the kernel's CPU time, peak RSS, memory on huge pages.
 * - The launcher's own cost: `cutout --version` both ways.
 * - The steady state: children that cut the fixtures out after a warm-up pass, with the tunable or
 *   not, per image end to end and the raw session run.
 *
 * `--pause MS` (default 3000) waits before every timed child. On a KVM guest whose balloon reports
 * free memory to the host (page_reporting), memory freed for 2 s is handed back, and a 2 MB page
 * taken from it is faulted in again by the host: without the pause, one child reuses the memory
 * the previous one freed a moment ago, which a user's first command after a pause does not
 * (docs/internals.md, "Huge pages").
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { peakRssMb, anonHugeMb, rawRun } from './speed-precision.js';
import { BIN, median } from './common.js';

const MODES = ['on', 'off'] as const;
type Mode = (typeof MODES)[number];
type Precision = 'fp32' | 'int8';

const sleep = (ms: number) => {
  if (ms > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
};

/** The environment of a child: through the launcher (CUTOUT_HUGEPAGES) or the tunable directly. */
function envFor(mode: Mode, via: 'launcher' | 'tunable'): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.GLIBC_TUNABLES;
  delete env.CUTOUT_HUGEPAGES;
  if (via === 'launcher') env.CUTOUT_HUGEPAGES = mode === 'on' ? '1' : '0';
  else if (mode === 'on') env.GLIBC_TUNABLES = 'glibc.malloc.hugetlb=1';
  return env;
}

function wall(args: string[], env: NodeJS.ProcessEnv): number {
  const t = performance.now();
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env });
  if (r.status !== 0) throw new Error(`cutout ${args.join(' ')} failed: ${r.stderr}`);
  return performance.now() - t;
}

function childJson(args: string[], env: NodeJS.ProcessEnv): Record<string, number> {
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', env, maxBuffer: 16 << 20 });
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, number>;
}

const medianOf = (xs: Record<string, number>[]) =>
  Object.fromEntries(Object.keys(xs[0]).filter((k) => typeof xs[0][k] === 'number').map((k) => [k, Math.round(median(xs.map((x) => x[k])))]));

/** The load average now (1 minute), printed beside the figures. */
const load = () => +os.loadavg()[0].toFixed(2);

export interface ColdHugePagesOptions {
  rounds: number;
  pauseMs: number;
  precisions: Precision[];
}

/** The first image with huge pages on and off, per precision: the CLI and the in-process split. */
export function coldHugePages(photo: string, model: string, opts: ColdHugePagesOptions) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-huge-'));
  const loads: number[] = [load()];
  try {
    const ext = path.extname(photo);
    const a = path.join(dir, `a${ext}`);
    const b = path.join(dir, `b${ext}`);
    fs.copyFileSync(photo, a);
    fs.copyFileSync(photo, b);
    const common = ['--model', model, '--data', path.join(dir, 'data'), '-c', '1', '--overwrite', '-q'];
    const split = fileURLToPath(new URL('./cold-split.js', import.meta.url));
    // The launcher alone: `cutout --version` (no model) both ways.
    const version: Record<Mode, number[]> = { on: [], off: [] };
    for (let r = 0; r < 5; r++) for (const m of r % 2 ? [...MODES].reverse() : MODES) version[m].push(wall(['--version'], envFor(m, 'launcher')));
    const rows: Record<string, Record<string, number | null>> = {};
    const samples: Record<string, { one_photo_ms: number[]; two_photos_ms: number[] }> = {};
    for (const p of opts.precisions) {
      const cli: Record<Mode, { one: number[]; two: number[] }> = { on: { one: [], two: [] }, off: { one: [], two: [] } };
      const splits: Record<Mode, Record<string, number>[]> = { on: [], off: [] };
      for (let r = 0; r < opts.rounds; r++) {
        for (const m of r % 2 ? [...MODES].reverse() : MODES) {
          sleep(opts.pauseMs);
          cli[m].one.push(wall([a, '--out', path.join(dir, 'one-out.png'), '--precision', p, ...common], envFor(m, 'launcher')));
          sleep(opts.pauseMs);
          cli[m].two.push(wall([a, b, '--precision', p, ...common], envFor(m, 'launcher')));
          sleep(opts.pauseMs);
          splits[m].push(childJson([split, a, model, p], envFor(m, 'tunable')));
          loads.push(load());
        }
      }
      for (const m of MODES) {
        const one = median(cli[m].one);
        const further = median(cli[m].two) - one;
        const s = medianOf(splits[m]);
        rows[`${p} ${m}`] = {
          one_photo_ms: Math.round(one), two_photos_ms: Math.round(median(cli[m].two)), further_photo_ms: Math.round(further), first_extra_ms: Math.round(one - further),
          split_first_image_ms: s.first_image_ms, split_second_image_ms: s.second_image_ms, first_run_ms: s.first_inference_ms, second_run_ms: s.second_inference_ms,
          first_run_extra_ms: s.first_inference_ms - s.second_inference_ms, session_ms: s.session_ms,
          first_faults: s.first_image_minor_faults, second_faults: s.second_image_minor_faults, first_system_ms: s.first_image_system_ms, second_system_ms: s.second_image_system_ms,
          peak_rss_mb: s.peak_rss_mb, anon_huge_mb: s.anon_huge_mb ?? null,
        };
        samples[`${p} ${m}`] = { one_photo_ms: cli[m].one.map(Math.round), two_photos_ms: cli[m].two.map(Math.round) };
      }
    }
    const json = {
      rounds: opts.rounds, pause_ms: opts.pauseMs, load_average: loads,
      launcher_version_ms: { on: Math.round(median(version.on)), off: Math.round(median(version.off)) },
      rows, samples,
    };
    return { json, text: coldText(json) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function coldText(json: { rounds: number; pause_ms: number; load_average: number[]; launcher_version_ms: Record<Mode, number>; rows: Record<string, Record<string, number | null>> }): string {
  const cols: [string, string][] = [
    ['one_photo_ms', 'one'], ['two_photos_ms', 'two'], ['further_photo_ms', 'further'], ['first_extra_ms', 'first-extra'],
    ['split_first_image_ms', 'split-1st'], ['split_second_image_ms', 'split-2nd'], ['first_run_ms', 'run-1st'], ['second_run_ms', 'run-2nd'],
    ['first_faults', 'faults-1st'], ['second_faults', 'faults-2nd'], ['first_system_ms', 'sys-1st'], ['second_system_ms', 'sys-2nd'],
    ['peak_rss_mb', 'peak-MB'], ['anon_huge_mb', 'huge-MB'],
  ];
  let text = `\nhuge pages (issue 38), on = CUTOUT_HUGEPAGES=1 through the launcher (CLI) or GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (split); ` +
    `${json.rounds} alternated rounds, medians, ${json.pause_ms} ms pause before each child; load average ${Math.min(...json.load_average)}-${Math.max(...json.load_average)}\n`;
  text += `launcher alone (cutout --version, median of 5): on ${json.launcher_version_ms.on} ms, off ${json.launcher_version_ms.off} ms\n`;
  text += `row        ${cols.map(([, h]) => h.padStart(12)).join('')}\n`;
  for (const [k, r] of Object.entries(json.rows)) text += `${k.padEnd(10)} ${cols.map(([c]) => String(r[c] ?? '-').padStart(12)).join('')}\n`;
  text += '(one, two: the CLI with one and two photos; first-extra = one - (two - one); split: cold-split.js, its first and second image, their model runs, minor page faults, kernel CPU ms; peak-MB: VmHWM; huge-MB: AnonHugePages after the second image)\n';
  return text;
}

/** Child mode (`speed.js --steady-child MODEL PRECISION PASSES FILE...`): per image end to end and raw run, after a warm-up pass. */
export async function steadyChild(model: string, precision: Precision, passes: number, files: string[]): Promise<void> {
  const { createPipeline } = await import('../dist/pipeline/index.js');
  const pipeline = createPipeline({ model, precision });
  await pipeline.loadModel();
  const buffers = files.map((f) => fs.readFileSync(f));
  const request = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false, precision };
  for (const b of buffers) await pipeline.removeBackground(b, request);
  await rawRun(pipeline, precision);
  const e2e: number[] = [];
  const raw: number[] = [];
  // Per image, whole process: faults and kernel time left once the arena is warm (memory the
  // pipeline maps afresh for each image: decode, matte and encode buffers).
  const before = process.resourceUsage();
  for (let i = 0; i < passes; i++) {
    for (const b of buffers) {
      raw.push(await rawRun(pipeline, precision));
      e2e.push((await pipeline.removeBackground(b, request)).ms);
    }
  }
  const after = process.resourceUsage();
  const n = e2e.length;
  process.stdout.write(JSON.stringify({
    end_to_end_ms: Math.round(median(e2e)), raw_ms: Math.round(median(raw)),
    faults_per_image: Math.round((after.minorPageFault - before.minorPageFault) / n), system_ms_per_image: Math.round((after.systemCPUTime - before.systemCPUTime) / 1000 / n),
    peak_rss_mb: peakRssMb(), anon_huge_mb: anonHugeMb(),
  }) + '\n');
  await pipeline.close();
}

/** The steady state with huge pages on and off: `children` children each, alternated, per precision. */
export function steadyHugePages(files: string[], model: string, opts: { children: number; passes: number; precisions: Precision[] }) {
  const bench = fileURLToPath(new URL('./speed.js', import.meta.url));
  const loads: number[] = [load()];
  const rows: Record<string, Record<string, number | null>> = {};
  const ratios: Record<string, { end_to_end: number; raw: number }> = {};
  for (const p of opts.precisions) {
    const results: Record<Mode, Record<string, number>[]> = { on: [], off: [] };
    for (let c = 0; c < opts.children; c++) {
      for (const m of c % 2 ? [...MODES].reverse() : MODES) {
        results[m].push(childJson([bench, '--steady-child', model, p, String(opts.passes), ...files], envFor(m, 'tunable')));
        loads.push(load());
      }
    }
    for (const m of MODES) rows[`${p} ${m}`] = medianOf(results[m]);
    ratios[p] = {
      end_to_end: +(rows[`${p} on`].end_to_end_ms! / rows[`${p} off`].end_to_end_ms!).toFixed(3),
      raw: +(rows[`${p} on`].raw_ms! / rows[`${p} off`].raw_ms!).toFixed(3),
    };
  }
  const json = { children: opts.children, passes: opts.passes, images: files.length, load_average: loads, rows, on_over_off: ratios };
  let text = `\nhuge pages, steady state (${opts.children} children per mode, alternated, each ${opts.passes} passes over ${files.length} image(s) after a warm-up pass; medians; load average ${Math.min(...loads)}-${Math.max(...loads)}):\n`;
  text += 'row        end-to-end-ms  raw-run-ms  faults/image  sys-ms/image  peak-MB  huge-MB   (faults and kernel time per image and raw run, whole process)\n';
  for (const [k, r] of Object.entries(rows)) {
    text += `${k.padEnd(10)} ${String(r.end_to_end_ms).padStart(13)} ${String(r.raw_ms).padStart(11)} ${String(r.faults_per_image).padStart(13)} ${String(r.system_ms_per_image).padStart(13)} ${String(r.peak_rss_mb).padStart(8)} ${String(r.anon_huge_mb ?? '-').padStart(8)}\n`;
  }
  for (const [p, r] of Object.entries(ratios)) text += `${p}: on / off = ${r.end_to_end} end to end, ${r.raw} raw run\n`;
  return { json, text };
}
