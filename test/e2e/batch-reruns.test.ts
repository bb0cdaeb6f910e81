/**
 * Reruns and restarts of `cutout remove` as a first-day user meets them (issue 51), through the
 * real bin/cutout in child processes, on real photos and the real model:
 *
 * - `--review-below` on a rerun with `--manifest` reviews the photos skipped as done from the
 *   confidence their manifest lines recorded, without redoing them (or loading the model);
 * - the README's hot folder, `cutout inbox/ --watch -o inbox/done/` (no manifest), restarted:
 *   photos whose outputs are there and newer than them are taken as done, a new one is done, and
 *   the watch ends with exit 0; a photo changed while it was stopped is refused as a batch refuses it;
 * - a photo the watcher takes while it is still being written (a writer child that pauses) fails
 *   as truncated, is done once whole, and counts by that last outcome: 0 failed, exit 0;
 * - a JPEG missing only its 2-byte end marker is cut out; one cut in half is refused as truncated.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import sharp from 'sharp';
import { BIN, FIXTURES } from '../helpers/cli.js';

const WORKER_LOG_PRELOAD = new URL('../helpers/worker-log.mjs', import.meta.url).href;
const ROOT_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-reruns-'));
t.teardown(() => fs.rmSync(ROOT_DIR, { recursive: true, force: true }));
const env = { CUTOUT_HOME: path.join(ROOT_DIR, 'home') };
const FAST = ['--quality', 'fast', '--size', 'preview', '--no-progress'];

/** Three small, distinct photos, one of each fixture. */
async function photos(dir: string): Promise<string[]> {
  fs.mkdirSync(dir, { recursive: true });
  const names: string[] = [];
  for (const name of ['astronaut', 'chelsea', 'coffee']) {
    await sharp(path.join(FIXTURES, `${name}.jpg`)).resize({ width: 240 }).jpeg().toFile(path.join(dir, `${name}.jpg`));
    names.push(`${name}.jpg`);
  }
  return names;
}

/** Children still running when the file ends (a failed wait) are killed, never left behind. */
const children = new Set<ChildProcess>();
t.teardown(() => {
  for (const child of children) child.kill('SIGKILL');
});

interface Child {
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout(): string;
  stderr(): string;
  kill(signal: NodeJS.Signals): void;
  child: ChildProcess;
}

/** `node ARGS` in `cwd` (bin/cutout, or a writer script), its output gathered. */
function node(args: string[], cwd: string, extraEnv: Record<string, string> = {}, stdin: 'end' | 'keep' = 'end'): Child {
  const child = spawn(process.execPath, args, { cwd, env: { ...process.env, ...env, ...extraEnv } });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  if (stdin === 'end') child.stdin!.end();
  children.add(child);
  child.on('close', () => children.delete(child));
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  return { done, stdout: () => out, stderr: () => err, kill: (signal) => child.kill(signal), child };
}

/** `cutout ARGS` in `cwd`, with the worker-thread log preloaded when `workerLog` is given. */
function cutout(args: string[], cwd: string, workerLog?: string): Child {
  const preload = workerLog ? ['--import', WORKER_LOG_PRELOAD] : [];
  return node([...preload, BIN, ...args], cwd, workerLog ? { CUTOUT_TEST_WORKER_LOG: workerLog } : {});
}

async function until(what: string, check: () => boolean, timeoutMs = 180_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const jsonLines = (out: string): any[] => out.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const manifestLines = (file: string): any[] => jsonLines(fs.readFileSync(file, 'utf8'));
const workerStarts = (log: string) => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0);
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

t.test('--review-below on a rerun reviews the photos skipped as done from the confidences their manifest recorded, redoing none', async (t) => {
  const dir = path.join(ROOT_DIR, 'review');
  const names = await photos(path.join(dir, 'in'));
  const args = ['in', '--out', 'out', '--manifest', 'run.jsonl', '--json', ...FAST];
  const first = cutout(args, dir);
  t.equal((await first.done).code, 0, first.stderr());
  const recorded = new Map<string, number>(manifestLines(path.join(dir, 'run.jsonl')).map((l) => [l.input, l.confidence]));
  t.equal(recorded.size, names.length, 'each photo recorded with its confidence');
  const confidences = [...recorded.values()].sort((a, b) => a - b);
  // A threshold between the least and the most confident: some photos below it, some not.
  const threshold = Number(((confidences[0] + confidences.at(-1)!) / 2).toFixed(3));
  const below = [...recorded].filter(([, c]) => c < threshold).map(([input]) => input).sort();
  t.ok(below.length >= 1 && below.length < names.length, `confidences ${confidences.join(', ')}: ${below.length} below ${threshold}`);

  const workerLog = path.join(dir, 'workers.log');
  const rerun = cutout([...args, '--review-below', String(threshold)], dir, workerLog);
  t.equal((await rerun.done).code, 0, rerun.stderr());
  const lines = jsonLines(rerun.stdout());
  const items = lines.filter((l) => !l.summary);
  t.ok(items.length === names.length && items.every((l) => l.skipped === true), 'every photo skipped as unchanged');
  t.same(items.filter((l) => l.review).map((l) => l.input).sort(), below, '"review": true on the skipped photos whose recorded confidence is below the threshold');
  for (const l of items) t.equal(l.confidence, recorded.get(l.input), `${l.input}: its line carries the confidence it was judged by`);
  for (const input of below) t.match(rerun.stderr(), new RegExp(`review: ${escape(input)} \\(confidence ${recorded.get(input)!.toFixed(2)}\\)`), `a review line for ${input}`);
  t.equal(rerun.stderr().match(/^review: /gm)?.length ?? 0, below.length, 'and none for the others');
  t.match(lines.at(-1), { summary: { done: 0, skipped: names.length, failed: 0, review: below.length } }, 'counted in the JSON summary');
  t.match(rerun.stderr(), new RegExp(`cutout: 0 done, ${names.length} skipped, 0 failed, ${below.length} to review \\(confidence below ${escape(String(threshold))}\\)`), 'and in the summary line');
  t.equal(manifestLines(path.join(dir, 'run.jsonl')).length, names.length, 'nothing redone: no line appended');
  t.equal(workerStarts(workerLog), 0, 'and no model started');
});

t.test('the README\'s hot folder without --manifest, restarted: outputs newer than their photos are taken as done, a new photo is done, exit 0', async (t) => {
  const dir = path.join(ROOT_DIR, 'hot-restart');
  const src = path.join(dir, 'src');
  const names = await photos(src);
  fs.mkdirSync(path.join(dir, 'inbox'));
  for (const n of names.slice(0, 2)) fs.copyFileSync(path.join(src, n), path.join(dir, 'inbox', n));
  const args = ['inbox/', '--watch', '-o', 'inbox/done/', '--json', '-c', '1', ...FAST];
  const output = (n: string) => path.join(dir, 'inbox', 'done', n.replace('.jpg', '.cutout.png'));

  const first = cutout(args, dir);
  await until('the first watcher ready with two photos done', () => /watching inbox/.test(first.stderr()) && names.slice(0, 2).every((n) => fs.existsSync(output(n))));
  first.kill('SIGTERM');
  t.equal((await first.done).code, 0, first.stderr());
  t.match(first.stderr(), /cutout: 2 done, 0 skipped, 0 failed in/);
  const madeAt = names.slice(0, 2).map((n) => fs.statSync(output(n)).mtimeMs);

  // Restarted after a third photo came in while it was stopped.
  fs.copyFileSync(path.join(src, names[2]), path.join(dir, 'inbox', names[2]));
  const restart = cutout(args, dir);
  await until('the restarted watcher ready with the new photo done', () => /watching inbox/.test(restart.stderr()) && fs.existsSync(output(names[2])));
  // The rescan once the watch holds (each photo after its size has held still for a second)
  // must not take the earlier photos again either: time for such a take to show.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  restart.kill('SIGTERM');
  const end = await restart.done;
  t.equal(end.code, 0, `the restart ends with exit 0: ${restart.stderr()}`);
  t.match(restart.stderr(), /cutout: 2 photos have their outputs already there, newer than them: taken as done; --overwrite redoes them/);
  t.match(restart.stderr(), /cutout: 1 done, 2 skipped, 0 failed in/, 'the summary');
  t.notMatch(restart.stderr(), /exists; use --overwrite|already there; run it again/, 'nothing refused');
  const lines = jsonLines(restart.stdout());
  t.same(lines.filter((l) => !l.summary).map((l) => [l.input, Boolean(l.skipped), l.error]).sort(),
    [[`inbox/${names[0]}`, true, null], [`inbox/${names[1]}`, true, null], [`inbox/${names[2]}`, false, null]], 'the earlier two skipped, the new one done, each once');
  t.same(names.slice(0, 2).map((n) => fs.statSync(output(n)).mtimeMs), madeAt, 'the earlier outputs untouched');

  // A photo changed while the watcher was stopped (newer than its output): refused as a batch
  // refuses an existing output, never replaced unasked.
  const later = new Date(Date.now() + 60_000);
  fs.utimesSync(path.join(dir, 'inbox', names[0]), later, later);
  const changed = cutout(args, dir);
  await until('the third watcher ready', () => /watching inbox/.test(changed.stderr()));
  changed.kill('SIGTERM');
  t.equal((await changed.done).code, 1, changed.stderr());
  t.match(changed.stderr(), new RegExp(`cutout: inbox/${escape(names[0])}: Output inbox/done/${escape(names[0].replace('.jpg', '.cutout.png'))} exists; use --overwrite or --skip-existing`));
  t.match(changed.stderr(), /cutout: 0 done, 2 skipped, 1 failed in/);
});

/**
 * A writer child: writes FILE from SOURCE in pieces with pauses, the last piece only once told
 * to on its stdin (the test tells it once the watcher has read the file half-written).
 */
const WRITER = `
const fs = require('node:fs');
const [file, source] = process.argv.slice(1);
const bytes = fs.readFileSync(source);
const cut = [0, Math.floor(bytes.length * 0.3), Math.floor(bytes.length * 0.6), bytes.length];
const fd = fs.openSync(file, 'w');
fs.writeSync(fd, bytes.subarray(cut[0], cut[1]));
setTimeout(() => {
  fs.writeSync(fd, bytes.subarray(cut[1], cut[2]));
  process.stdout.write('paused\\n');
  process.stdin.once('data', () => {
    fs.writeSync(fd, bytes.subarray(cut[2], cut[3]));
    fs.closeSync(fd);
    process.stdout.write('written\\n');
    process.exit(0);
  });
}, 300);
`;

t.test('--watch: a photo read while still being written fails as truncated, is done once whole, and counts by that last outcome (0 failed, exit 0)', async (t) => {
  const dir = path.join(ROOT_DIR, 'hot-slow');
  const names = await photos(path.join(dir, 'src'));
  fs.mkdirSync(path.join(dir, 'hot'));
  const args = ['hot', '--watch', '--out', 'hot/out', '--manifest', 'hot.jsonl', '--json', '-c', '1', ...FAST];
  const watcher = cutout(args, dir);
  await until('the watcher ready', () => /watching hot/.test(watcher.stderr()));

  const file = path.join(dir, 'hot', names[1]);
  const writer = node(['-e', WRITER, file, path.join(dir, 'src', names[1])], dir, {}, 'keep');
  await until('the writer paused with the file half-written', () => /paused/.test(writer.stdout()));
  // The pause outlasts the watcher's settle window: it reads the file as it is.
  await until('the half-written photo read and refused', () => /Truncated JPEG file/.test(watcher.stderr()));
  writer.child.stdin!.write('go\n');
  t.equal((await writer.done).code, 0, writer.stderr());
  const whole = () => jsonLines(watcher.stdout()).find((l) => l.input === `hot/${names[1]}` && !l.error);
  await until('the photo done once whole', () => whole() !== undefined);
  watcher.kill('SIGTERM');
  const end = await watcher.done;

  const lines = jsonLines(watcher.stdout());
  const forIt = lines.filter((l) => l.input === `hot/${names[1]}`);
  t.match(forIt[0], { error: { code: 'unsupported_format', message: 'Truncated JPEG file' } }, 'first read half-written: refused as truncated');
  t.equal(forIt.length, 2, 'taken twice: half-written, then whole');
  t.match(forIt.at(-1), { error: null, output: `hot/out/${names[1].replace('.jpg', '.cutout.png')}` }, 'then done');
  t.equal((await sharp(path.join(dir, 'hot', 'out', names[1].replace('.jpg', '.cutout.png'))).metadata()).width, 240, 'its output is the whole photo\'s');
  t.equal(end.code, 0, `exit 0: its last outcome counts, not its first: ${watcher.stderr()}`);
  t.match(watcher.stderr(), /cutout: 1 done, 0 skipped, 0 failed in/, 'the summary line: 0 failed');
  t.match(lines.at(-1), { summary: { done: 1, failed: 0 } }, 'and the JSON summary');
  t.match(manifestLines(path.join(dir, 'hot.jsonl')).at(-1), { input: `hot/${names[1]}`, error: null }, 'its last manifest line is the done one');
});

t.test('a JPEG missing only its 2-byte end marker is cut out; one cut in half is refused as truncated', async (t) => {
  const dir = path.join(ROOT_DIR, 'eoi');
  fs.mkdirSync(dir);
  const whole = fs.readFileSync(path.join(FIXTURES, 'chelsea.jpg'));
  t.equal(whole.subarray(-2).toString('hex'), 'ffd9', 'the fixture ends in its end marker');
  fs.writeFileSync(path.join(dir, 'no-end.jpg'), whole.subarray(0, whole.length - 2));
  fs.writeFileSync(path.join(dir, 'half.jpg'), whole.subarray(0, Math.floor(whole.length / 2)));
  const r = cutout(['no-end.jpg', 'half.jpg', '--json', ...FAST], dir);
  t.equal((await r.done).code, 1, 'one input failed: exit 1');
  const lines = jsonLines(r.stdout()).filter((l) => !l.summary);
  t.match(lines.find((l) => l.input === 'no-end.jpg'), { error: null, output: 'no-end.cutout.png' }, 'the one without its end marker is cut out');
  t.equal((await sharp(path.join(dir, 'no-end.cutout.png')).metadata()).width, 451, 'whole: the photo\'s width (preview keeps 451x300)');
  t.match(lines.find((l) => l.input === 'half.jpg'), { output: null, error: { code: 'unsupported_format', message: 'Truncated JPEG file' } }, 'the one cut in half is refused');
  t.match(r.stderr(), /cutout: half\.jpg: Truncated JPEG file/);
  t.notOk(fs.existsSync(path.join(dir, 'half.cutout.png')), 'and nothing written for it');
});
