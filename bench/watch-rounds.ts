/**
 * `npm run bench:watch`: the hot-folder case of issue 42, through the real CLI and the real model,
 * round after round. Each round starts `cutout in -o out --watch --recursive` on a folder with one
 * photo, waits for its output, then at once copies two photos into the folder and one into a new
 * sub-folder while a fourth is written slowly (five chunks, 300 ms apart), waits up to 30 s for
 * all five outputs, and stops the watcher with SIGTERM. A round loses nothing when every photo has
 * its output and the watcher exits 0. Prints one line per round and the count of rounds that lost
 * photos; exits 1 when any did.
 *
 * Flags: --rounds N (20), --keep (leave the folders).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import sharp from 'sharp';
import { ROOT, BIN, FIXTURES, arg } from './common.js';


const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) return false;
    await sleep(50);
  }
  return true;
}

function outputs(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => f.endsWith('.cutout.png')).sort();
}

async function round(work: string, sources: Buffer[]): Promise<{ lost: string[]; code: number | null; seconds: number }> {
  const started = performance.now();
  const inDir = path.join(work, 'in');
  const outDir = path.join(work, 'out');
  fs.mkdirSync(inDir, { recursive: true });
  fs.writeFileSync(path.join(inDir, 'first.jpg'), sources[0]);
  const child = spawn(process.execPath, [BIN, 'in', '-o', 'out', '--watch', '--recursive', '--quality', 'fast', '--size', 'preview', '--no-progress', '-q'], {
    cwd: work, env: { ...process.env, CUTOUT_HOME: path.join(work, 'home') }, stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await until(() => outputs(outDir).length === 1, 60_000);
  // At once: two into the folder, one into a new sub-folder, one written slowly.
  fs.writeFileSync(path.join(inDir, 'a.jpg'), sources[1]);
  fs.mkdirSync(path.join(inDir, 'new'));
  fs.writeFileSync(path.join(inDir, 'new', 'b.jpg'), sources[2]);
  fs.writeFileSync(path.join(inDir, 'c.jpg'), sources[3]);
  const fd = fs.openSync(path.join(inDir, 'slow.jpg'), 'w');
  for (let i = 0; i < 5; i++) {
    const slow = sources[4];
    fs.writeSync(fd, slow.subarray(Math.floor((slow.length * i) / 5), Math.floor((slow.length * (i + 1)) / 5)));
    await sleep(300);
  }
  fs.closeSync(fd);
  const expected = ['a.cutout.png', 'c.cutout.png', 'first.cutout.png', path.join('new', 'b.cutout.png'), 'slow.cutout.png'];
  await until(() => outputs(outDir).length >= expected.length, 30_000);
  child.kill('SIGTERM');
  const code = await exited;
  const got = outputs(outDir);
  return { lost: expected.filter((e) => !got.includes(e)), code, seconds: (performance.now() - started) / 1000 };
}

async function main(): Promise<void> {
  const rounds = Number(arg('rounds', '20'));
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-watch-rounds-'));
  const names = ['astronaut', 'chelsea', 'coffee', 'astronaut', 'chelsea'];
  const sources = await Promise.all(names.map((n, i) => {
    const image = sharp(path.join(FIXTURES, `${n}.jpg`)).resize({ width: 240 + 8 * i });
    return (i >= 3 ? image.flop() : image).jpeg().toBuffer();
  }));
  let losing = 0;
  for (let i = 1; i <= rounds; i++) {
    const r = await round(path.join(base, `round-${i}`), sources);
    if (r.lost.length || r.code !== 0) losing++;
    process.stdout.write(`round ${i}: ${r.lost.length ? `LOST ${r.lost.join(', ')}` : 'all 5 done'}, exit ${r.code}, ${r.seconds.toFixed(1)} s\n`);
  }
  process.stdout.write(`${rounds - losing} of ${rounds} rounds lost nothing\n`);
  if (!process.argv.includes('--keep')) fs.rmSync(base, { recursive: true, force: true });
  process.exitCode = losing ? 1 : 0;
}

await main();
