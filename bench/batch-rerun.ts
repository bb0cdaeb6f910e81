/**
 * `npm run bench:rerun`: a batch and its unchanged rerun with --manifest, through the real CLI in
 * child processes. Makes a folder of N photos (default 60: the test fixtures, resized and mirrored
 * so that no two share bytes), runs `cutout DIR --out OUT --manifest FILE` once (the first run:
 * every photo through the model), then the same command again (the rerun: nothing changed, so
 * it must hash the photos and stop without loading the model). Prints both wall times.
 *
 * Flags: --photos N (60), --quality Q (fast), --size S (preview), --keep (leave the folder).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import sharp from 'sharp';
import { ROOT, BIN, FIXTURES, arg } from './common.js';


/** `count` distinct photos: each fixture at a few widths, mirrored or not. */
async function makePhotos(dir: string, count: number): Promise<void> {
  const fixtures = fs.readdirSync(FIXTURES).filter((f) => f.endsWith('.jpg')).sort();
  fs.mkdirSync(dir, { recursive: true });
  for (let i = 0; i < count; i++) {
    const fixture = fixtures[i % fixtures.length];
    const variant = Math.floor(i / fixtures.length);
    let image = sharp(path.join(FIXTURES, fixture)).resize({ width: 320 + 8 * (variant >> 1) });
    if (variant % 2) image = image.flop();
    await image.jpeg({ quality: 90 }).toFile(path.join(dir, `${String(i).padStart(3, '0')}-${fixture}`));
  }
}

function timedRun(args: string[], cwd: string, env: NodeJS.ProcessEnv): { seconds: number; summary: Record<string, unknown>; stderr: string } {
  const started = performance.now();
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const seconds = (performance.now() - started) / 1000;
  if (r.status !== 0) throw new Error(`cutout ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  const last = r.stdout.trim().split('\n').at(-1) ?? '{}';
  return { seconds, summary: (JSON.parse(last) as { summary: Record<string, unknown> }).summary, stderr: r.stderr };
}

async function main(): Promise<void> {
  const count = Number(arg('photos', '60'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-rerun-'));
  const env = { ...process.env, CUTOUT_HOME: path.join(dir, 'home') };
  try {
    await makePhotos(path.join(dir, 'photos'), count);
    const args = ['photos', '--out', 'cutouts', '--manifest', 'cutouts.jsonl', '--quality', arg('quality', 'fast'), '--size', arg('size', 'preview'), '--json', '--no-progress'];
    const first = timedRun(args, dir, env);
    const rerun = timedRun(args, dir, env);
    if (rerun.summary.done !== 0 || rerun.summary.skipped !== count) throw new Error(`the rerun was not a no-op: ${JSON.stringify(rerun.summary)}`);
    if (!/the model was not loaded/.test(rerun.stderr)) throw new Error(`the rerun did not say it skipped the model: ${rerun.stderr}`);
    console.log(`batch of ${count} photos (${args.slice(5, 9).join(' ')}), wall time of the whole command:`);
    console.log(`  first run        ${first.seconds.toFixed(2)} s  (${JSON.stringify(first.summary)})`);
    console.log(`  unchanged rerun  ${rerun.seconds.toFixed(2)} s  (${JSON.stringify(rerun.summary)})`);
    console.log(`  ratio            ${(first.seconds / rerun.seconds).toFixed(0)}x`);
  } finally {
    if (!process.argv.includes('--keep')) fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
