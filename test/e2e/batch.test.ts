/**
 * The batch processor end to end (cli-contract, "The batch processor"), through the real
 * bin/cutout in child processes, on real photos and the real model: a batch stopped by SIGINT and
 * by kill -9 resumes from its manifest with every input processed once; an unchanged rerun starts
 * no model (a preload counts the worker threads the process starts); a changed photo and changed
 * options are redone; a watched folder takes files copied in, one written slowly, never its own
 * outputs, and stops cleanly on SIGTERM.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import sharp from 'sharp';
import { BIN, FIXTURES } from '../helpers/cli.js';
import { Manifest } from '../../src/commands/manifest.js';

const WORKER_LOG_PRELOAD = new URL('../helpers/worker-log.mjs', import.meta.url).href;
const ROOT_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-batch-'));
t.teardown(() => fs.rmSync(ROOT_DIR, { recursive: true, force: true }));
const env = { CUTOUT_HOME: path.join(ROOT_DIR, 'home') };
const FAST = ['--quality', 'fast', '--size', 'preview', '--no-progress'];

/** Five small, distinct photos (three fixtures, two mirrored). */
async function photos(dir: string): Promise<string[]> {
  fs.mkdirSync(dir, { recursive: true });
  const names: string[] = [];
  for (const [i, name] of ['astronaut', 'chelsea', 'coffee', 'astronaut', 'chelsea'].entries()) {
    const file = `p${i}-${name}.jpg`;
    let image = sharp(path.join(FIXTURES, `${name}.jpg`)).resize({ width: 240 });
    if (i >= 3) image = image.flop();
    await image.jpeg().toFile(path.join(dir, file));
    names.push(file);
  }
  return names;
}

/** Children still running when the file ends (a failed wait) are killed, never left behind. */
const children = new Set<import('node:child_process').ChildProcess>();
t.teardown(() => {
  for (const child of children) child.kill('SIGKILL');
});

interface Child {
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout(): string;
  stderr(): string;
  kill(signal: NodeJS.Signals): void;
}

/** `cutout ARGS` in `cwd`, with the worker-thread log preloaded when `workerLog` is given. */
function cutout(args: string[], cwd: string, workerLog?: string): Child {
  const preload = workerLog ? ['--import', WORKER_LOG_PRELOAD] : [];
  const child = spawn(process.execPath, [...preload, BIN, ...args], { cwd, env: { ...process.env, ...env, ...(workerLog ? { CUTOUT_TEST_WORKER_LOG: workerLog } : {}) } });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdin.end();
  children.add(child);
  child.on('close', () => children.delete(child));
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  return { done, stdout: () => out, stderr: () => err, kill: (signal) => child.kill(signal) };
}

async function until(what: string, check: () => boolean, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface Line { input: string; sha256: string; output: string | null; options: Record<string, unknown>; error: unknown }
const manifestLines = (file: string): Line[] =>
  fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).flatMap((l) => { try { return [JSON.parse(l) as Line]; } catch { return []; } }) : [];
const jsonLines = (out: string) => out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
const workerStarts = (log: string) => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0);

/** Every output in `dir` decodes, and none is a temporary file under an output's name. */
async function decodeAll(t: Tap.Test, dir: string, expected: number): Promise<void> {
  const outputs = fs.readdirSync(dir).filter((f) => f.endsWith('.cutout.png'));
  t.equal(outputs.length, expected, `${expected} outputs in ${path.basename(dir)}`);
  for (const f of outputs) {
    const meta = await sharp(path.join(dir, f)).metadata();
    t.ok(meta.width && meta.height && meta.format === 'png', `${f} decodes`);
  }
}

for (const signal of ['SIGINT', 'SIGKILL'] as const) {
  t.test(`a batch stopped by ${signal} resumes from its manifest: each input once, every output valid`, async (t) => {
    const dir = path.join(ROOT_DIR, signal);
    const names = await photos(path.join(dir, 'in'));
    const args = ['in', '--out', 'out', '--manifest', 'run.jsonl', '-c', '1', ...FAST];
    const first = cutout(args, dir);
    await until('the first manifest line', () => manifestLines(path.join(dir, 'run.jsonl')).length >= 1);
    first.kill(signal);
    const end = await first.done;
    const before = manifestLines(path.join(dir, 'run.jsonl'));
    if (signal === 'SIGINT') {
      t.equal(end.code, 130, `exit 130: ${first.stderr()}`);
      t.match(first.stderr(), /cutout: interrupted \(SIGINT\): \d+ done, \d+ left; run the same command again to continue/);
      t.notMatch(first.stderr(), /Error|abort/i, 'no crash on the way out');
    } else {
      t.equal(end.signal, 'SIGKILL');
    }
    t.ok(before.length >= 1 && before.length < names.length, `stopped mid-batch (${before.length} of ${names.length} recorded)`);
    for (const line of before) t.ok(line.error === null && fs.existsSync(path.join(dir, line.output!)), `${line.input}: recorded after its output was in place`);
    await decodeAll(t, path.join(dir, 'out'), fs.readdirSync(path.join(dir, 'out')).filter((f) => f.endsWith('.cutout.png')).length);

    const rerun = cutout([...args, '--json'], dir);
    const again = await rerun.done;
    t.equal(again.code, 0, rerun.stderr());
    const after = manifestLines(path.join(dir, 'run.jsonl')).slice(before.length);
    const recordedBefore = before.map((l) => l.input).sort();
    t.same(after.map((l) => l.input).sort(), names.map((n) => `in/${n}`).filter((n) => !recordedBefore.includes(n)).sort(), 'the rerun processed exactly the inputs not recorded, once each');
    const summary = jsonLines(rerun.stdout()).at(-1).summary;
    t.match(summary, { done: after.length, skipped: before.length, failed: 0 });
    t.match(rerun.stderr(), new RegExp(`cutout: ${after.length} done, ${before.length} skipped, 0 failed in [\\d.]+ s \\([\\d.]+ images/s\\)`), 'the summary line');
    await decodeAll(t, path.join(dir, 'out'), names.length);
    t.same(fs.readdirSync(path.join(dir, 'out')).filter((f) => f.endsWith('.cutout.png') === false && !f.endsWith('.tmp')), [], 'nothing else in the output folder');
  });
}

t.test('an unchanged rerun starts no model; a changed photo and changed options are redone', async (t) => {
  const dir = path.join(ROOT_DIR, 'rerun');
  const names = await photos(path.join(dir, 'in'));
  const args = ['in', '--out', 'out', '--manifest', 'run.jsonl', ...FAST];
  const workerLog = path.join(dir, 'workers.log');
  const first = cutout(args, dir, workerLog);
  t.equal((await first.done).code, 0, first.stderr());
  t.ok(workerStarts(workerLog) >= 1, 'the first run started the model\'s worker thread (the log sees it)');

  fs.rmSync(workerLog);
  const unchanged = cutout([...args, '--json'], dir, workerLog);
  t.equal((await unchanged.done).code, 0, unchanged.stderr());
  t.equal(workerStarts(workerLog), 0, 'the unchanged rerun started no worker thread: no model was loaded');
  t.match(unchanged.stderr(), /nothing to do: every input is unchanged since the manifest; the model was not loaded/);
  t.match(jsonLines(unchanged.stdout()).at(-1), { summary: { done: 0, skipped: names.length, failed: 0 } });
  t.equal(manifestLines(path.join(dir, 'run.jsonl')).length, names.length, 'nothing appended');

  // A changed photo: redone, and its recorded output replaced without --overwrite.
  await sharp(path.join(FIXTURES, 'coffee.jpg')).resize({ width: 200 }).jpeg().toFile(path.join(dir, 'in', names[0]));
  const changed = cutout([...args, '--json'], dir, workerLog);
  t.equal((await changed.done).code, 0, changed.stderr());
  const redone = jsonLines(changed.stdout()).filter((l) => !l.summary && !l.skipped);
  t.same(redone.map((l) => l.input), [`in/${names[0]}`], 'only the changed photo was redone');
  t.equal((await sharp(path.join(dir, 'out', names[0].replace('.jpg', '.cutout.png'))).metadata()).width, 200, 'its output is the new photo\'s');

  // Changed options: every input redone.
  const recolored = cutout(['in', '--out', 'out', '--manifest', 'run.jsonl', '--bg-color', 'ffffff', ...FAST, '--json'], dir);
  t.equal((await recolored.done).code, 0, recolored.stderr());
  t.match(jsonLines(recolored.stdout()).at(-1), { summary: { done: names.length, skipped: 0 } }, 'another background colour redoes all');
  const last = manifestLines(path.join(dir, 'run.jsonl')).slice(-names.length);
  t.ok(last.every((l) => l.options.bg_color === '#ffffff' && l.error === null), 'the manifest records the options that change the output');

  fs.rmSync(workerLog, { force: true });
  const dry = cutout(['in', '--out', 'out', '--manifest', 'run.jsonl', ...FAST, '--dry-run'], dir, workerLog);
  t.equal((await dry.done).code, 0);
  t.equal(workerStarts(workerLog), 0, 'a dry run starts no model');
  t.match(dry.stderr(), new RegExp(`dry run: ${names.length} to process, 0 to skip, 0 would fail; nothing was written`), 'back to the first options: all to redo');
  t.equal(manifestLines(path.join(dir, 'run.jsonl')).length, names.length * 2 + 1, 'a dry run writes nothing');
});

t.test('a kill -9 between an output\'s rename and its manifest line: the rerun redoes that input instead of refusing its output', async (t) => {
  const dir = path.join(ROOT_DIR, 'inflight');
  const names = (await photos(path.join(dir, 'all'))).slice(0, 2);
  fs.mkdirSync(path.join(dir, 'in'));
  for (const n of names) fs.renameSync(path.join(dir, 'all', n), path.join(dir, 'in', n));
  const manifestFile = path.join(dir, 'run.jsonl');
  const args = ['in', '--out', 'out', '--manifest', 'run.jsonl', ...FAST];
  const first = cutout(args, dir);
  t.equal((await first.done).code, 0, first.stderr());
  t.equal(manifestLines(manifestFile).length, 2);
  t.notOk(fs.existsSync(`${manifestFile}.inflight`), 'a run that ends with every output recorded leaves no in-flight list');

  // What such a kill leaves: the last output in place, its line never written.
  const lines = fs.readFileSync(manifestFile, 'utf8').trim().split('\n');
  fs.writeFileSync(manifestFile, `${lines[0]}\n`);
  const lost = JSON.parse(lines[1]) as Line;
  const dryRun = async () => {
    const dry = cutout([...args, '--dry-run'], dir);
    await dry.done;
    return dry.stderr();
  };
  t.match(await dryRun(), /0 to process, 2 to skip, 0 would fail/, 'without the in-flight list the output would be adopted (complete, named as this run names it)');
  // The list as the killed run wrote it, just before the rename (the process died before close()).
  Manifest.load(manifestFile).placing(path.join(dir, lost.output!));
  t.match(await dryRun(), /1 to process, 1 to skip, 0 would fail/, 'with it, the output is known as ours');

  const rerun = cutout([...args, '--json'], dir);
  t.equal((await rerun.done).code, 0, rerun.stderr());
  t.same(jsonLines(rerun.stdout()).filter((l) => !l.summary && !l.skipped).map((l) => [l.input, l.error]), [[lost.input, null]], 'that input redone, its output replaced');
  t.match(manifestLines(manifestFile).at(-1), { input: lost.input, output: lost.output, error: null });
  t.notOk(fs.existsSync(`${manifestFile}.inflight`), 'the in-flight list is gone once its output is recorded');
  await decodeAll(t, path.join(dir, 'out'), 2);
});

t.test('--exclude leaves inputs out, by name or by path', async (t) => {
  const dir = path.join(ROOT_DIR, 'exclude');
  await photos(path.join(dir, 'in'));
  const byName = cutout(['in', '--exclude', '*chelsea*', '--exclude', 'in/p0-*', '--dry-run', '--json'], dir);
  t.equal((await byName.done).code, 0, byName.stderr());
  t.same(jsonLines(byName.stdout()).filter((l) => l.action).map((l) => l.input), ['in/p2-coffee.jpg', 'in/p3-astronaut.jpg']);
  const all = cutout(['in', '--exclude', '*.jpg'], dir);
  t.equal((await all.done).code, 2, 'nothing left is a usage error');
  t.match(all.stderr(), /nothing matched: .*\(5 left out by --exclude\)/);
});

t.test('a watched folder takes photos copied in, one written slowly, never its own outputs, and stops on SIGTERM', async (t) => {
  const dir = path.join(ROOT_DIR, 'watch');
  const names = await photos(path.join(dir, 'src'));
  fs.mkdirSync(path.join(dir, 'hot'));
  fs.copyFileSync(path.join(dir, 'src', names[0]), path.join(dir, 'hot', names[0]));
  // The output folder inside the watched one, and --recursive: it still must not be an input.
  const args = ['hot', '--watch', '--recursive', '--out', 'hot/out', '--manifest', 'hot.jsonl', '-c', '1', ...FAST];
  const watcher = cutout(args, dir);
  const lines = () => manifestLines(path.join(dir, 'hot.jsonl'));
  await until('the watcher ready and the first photo done', () => /watching hot/.test(watcher.stderr()) && lines().length === 1);

  fs.copyFileSync(path.join(dir, 'src', names[1]), path.join(dir, 'hot', names[1]));
  // Written in five chunks 300 ms apart: read only once complete.
  const slow = fs.readFileSync(path.join(dir, 'src', names[2]));
  const fd = fs.openSync(path.join(dir, 'hot', names[2]), 'w');
  for (let i = 0; i < 5; i++) {
    fs.writeSync(fd, slow.subarray(Math.floor((slow.length * i) / 5), Math.floor((slow.length * (i + 1)) / 5)));
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  fs.closeSync(fd);
  await until('both new photos done', () => lines().length >= 3);
  await new Promise((resolve) => setTimeout(resolve, 1500)); // time for a wrong event on its own outputs to show
  watcher.kill('SIGTERM');
  const end = await watcher.done;
  t.equal(end.code, 0, `SIGTERM ends the watch with exit 0: ${watcher.stderr()}`);
  t.match(watcher.stderr(), /cutout: 3 done, 0 skipped, 0 failed in/, 'the summary line');
  t.same(lines().map((l) => [l.input, l.error]), [names[0], names[1], names[2]].map((n) => [`hot/${n}`, null]), 'each photo once, none read half-way, no output taken as an input');
  await decodeAll(t, path.join(dir, 'hot', 'out'), 3);

  // A restart with the manifest skips what is done, and stops the same way.
  const workerLog = path.join(dir, 'workers.log');
  const restart = cutout(args, dir, workerLog);
  await until('the restarted watcher ready', () => /watching hot/.test(restart.stderr()));
  t.match(restart.stderr(), /3 unchanged since hot\.jsonl, skipped/);
  restart.kill('SIGINT');
  t.equal((await restart.done).code, 0);
  t.equal(lines().length, 3, 'nothing redone');
  t.equal(workerStarts(workerLog), 0, 'a restart with nothing new starts no model');
});
