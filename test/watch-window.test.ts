/**
 * The watcher's window (issue 42): photos that land between the first scan and the moment the
 * watch holds, into the top folder and into a new sub-folder, while another is written slowly,
 * are all taken, each once and only once complete; the output folder inside the watched one is
 * never an input; a photo the list took already is not taken again unless it changed.
 *
 * watchInputs runs in process against a recording stand-in for the batch run (the per-item
 * unit, the model and the manifest are batch.test.ts's subject): what is checked here is which
 * files the real watcher (chokidar on a real folder) hands over, and when.
 */
import t from 'tap';
import fs, { type Stats } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WATCH_UNFINISHED_SETTLE_MS, watchInputs, type WatchedRun } from '../src/commands/watch.js';
import { LIMITS } from '../src/limits.js';
import type { PlannedItem } from '../src/commands/remove-item.js';

const ROOT = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-watch-window-'));
t.teardown(() => fs.rmSync(ROOT, { recursive: true, force: true }));

/**
 * A JPEG's first bytes, a body and its end marker: any content will do, the stand-in reads only
 * the size (without the end marker the watcher would give each the longer wait of an unfinished file).
 */
const photo = (n: number) => Buffer.concat([Buffer.from([0xff, 0xd8, 0xff]), Buffer.alloc(2000 + n, n % 251), Buffer.from([0xff, 0xd9])]);

interface Taken {
  input: string;
  output: string | null;
  /** The file's size when the run took it: a half-written file would show a smaller one. */
  size: number;
}

/** What BatchRun does for the watcher, recorded: the files taken, their state, the interrupt. */
class RecordingRun implements WatchedRun {
  readonly taken: Taken[] = [];
  private readonly states = new Map<string, string>();
  private stop: (() => void) | null = null;
  interrupted = false;

  /** Inputs the list took before the watch (as batch.ts's process does). */
  tookBefore(file: string): void {
    const s = fs.statSync(file);
    this.states.set(path.resolve(file), `${s.size}:${s.mtimeMs}`);
  }

  async isUnchanged(): Promise<boolean> {
    return false;
  }

  tookAsIs(file: string, stats: Stats): boolean {
    return this.states.get(path.resolve(file)) === `${stats.size}:${stats.mtimeMs}`;
  }

  async process(planned: PlannedItem): Promise<void> {
    this.tookBefore(planned.item.path);
    this.taken.push({ input: path.relative(ROOT, planned.item.path), output: planned.output && path.relative(ROOT, planned.output), size: fs.statSync(planned.item.path).size });
  }

  untilInterrupted(): Promise<void> {
    return new Promise((resolve) => (this.stop = resolve));
  }

  interrupt(): void {
    this.interrupted = true;
    this.stop?.();
  }
}

async function until(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Writes `bytes` to `file` in five chunks `gapMs` apart (a slow copy). */
async function writeSlowly(file: string, bytes: Buffer, gapMs: number): Promise<void> {
  const fd = fs.openSync(file, 'w');
  for (let i = 0; i < 5; i++) {
    fs.writeSync(fd, bytes.subarray(Math.floor((bytes.length * i) / 5), Math.floor((bytes.length * (i + 1)) / 5)));
    await sleep(gapMs);
  }
  fs.closeSync(fd);
}

function startWatch(run: RecordingRun, hot: string, out: string): Promise<void> {
  return watchInputs(run, {
    inputs: [hot], recursive: true, exclude: [], outputPlan: { kind: 'directory', path: out },
    suffix: '.cutout', format: 'png', animationFormat: async () => null, quiet: true,
  });
}

t.test('photos added as the watch starts, into the folder and a new sub-folder, beside a slow one, are each taken once, complete', async (t) => {
  // Rounds with the photos landing at different moments around the watcher's readiness: at
  // once (before chokidar's first scan is done), and a little later.
  for (const [round, delay] of [0, 0, 30, 80, 150, 300].entries()) {
    const hot = path.join(ROOT, `hot-${round}`);
    const out = path.join(hot, 'out');
    fs.mkdirSync(out, { recursive: true });
    fs.writeFileSync(path.join(hot, 'first.jpg'), photo(1));
    fs.writeFileSync(path.join(out, 'stale.jpg'), photo(2)); // in the output folder: never an input
    const run = new RecordingRun();
    run.tookBefore(path.join(hot, 'first.jpg')); // done by the list
    const watching = startWatch(run, hot, out);
    await sleep(delay);
    fs.writeFileSync(path.join(hot, 'a.jpg'), photo(3));
    fs.mkdirSync(path.join(hot, 'new'));
    fs.writeFileSync(path.join(hot, 'new', 'b.jpg'), photo(4));
    const slow = writeSlowly(path.join(hot, 'c.jpg'), photo(5000), 250);
    fs.writeFileSync(path.join(hot, 'd.jpg'), photo(6));
    await slow;
    await until(`round ${round}: four photos taken`, () => run.taken.length >= 4);
    await sleep(1500); // time for a second, wrong take to show
    run.interrupt();
    await watching;
    const byInput = [...run.taken].sort((a, b) => a.input.localeCompare(b.input));
    t.same(byInput.map((x) => x.input), [`hot-${round}/a.jpg`, `hot-${round}/c.jpg`, `hot-${round}/d.jpg`, `hot-${round}/new/b.jpg`], `round ${round} (${delay} ms): each new photo once, the list's and the output folder's never`);
    t.equal(byInput.find((x) => x.input.endsWith('c.jpg'))!.size, photo(5000).length, `round ${round}: the slow photo taken only once complete`);
    t.equal(byInput.find((x) => x.input.endsWith('b.jpg'))!.output, `hot-${round}/out/new/b.cutout.png`, 'the sub-folder kept in the output layout');
  }
});

t.test('a photo the list took is taken again only when it changed; one added to the output folder later never is', async (t) => {
  const hot = path.join(ROOT, 'changed');
  const out = path.join(hot, 'done');
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(hot, 'kept.jpg'), photo(7));
  fs.writeFileSync(path.join(hot, 'edited.jpg'), photo(8));
  const run = new RecordingRun();
  run.tookBefore(path.join(hot, 'kept.jpg'));
  run.tookBefore(path.join(hot, 'edited.jpg'));
  const watching = startWatch(run, hot, out);
  fs.writeFileSync(path.join(hot, 'edited.jpg'), photo(900)); // changed between the list and the watch
  await sleep(1000);
  fs.writeFileSync(path.join(out, 'stray.jpg'), photo(9));
  await until('the edited photo taken', () => run.taken.length >= 1);
  await sleep(2000);
  run.interrupt();
  await watching;
  t.same(run.taken.map((x) => x.input), ['changed/edited.jpg'], 'the changed photo once; the unchanged one and the output folder\'s never');
});

t.test('the output folder as the watched folder itself: photos are still taken, outputs are not', async (t) => {
  const hot = path.join(ROOT, 'same');
  fs.mkdirSync(hot);
  const run = new RecordingRun();
  const watching = startWatch(run, hot, hot);
  fs.writeFileSync(path.join(hot, 'x.jpg'), photo(10));
  fs.writeFileSync(path.join(hot, 'x.cutout.png'), photo(11)); // what the run itself writes there
  await until('the photo taken', () => run.taken.length >= 1);
  await sleep(1500);
  run.interrupt();
  await watching;
  t.same(run.taken.map((x) => [x.input, x.output]), [['same/x.jpg', 'same/x.cutout.png']]);
});

t.test('a photo whose writer pauses for longer than the settle window, its end marker not there yet, is taken once, whole (issue 51)', async (t) => {
  t.ok(WATCH_UNFINISHED_SETTLE_MS >= LIMITS.watchSettleMs * 3, 'an unfinished file is given several times the settle window');
  const hot = path.join(ROOT, 'paused');
  const out = path.join(hot, 'out');
  fs.mkdirSync(out, { recursive: true });
  const run = new RecordingRun();
  const watching = startWatch(run, hot, out);
  await sleep(500);
  const whole = photo(3000);
  const fd = fs.openSync(path.join(hot, 'paused.jpg'), 'w');
  fs.writeSync(fd, whole.subarray(0, 1000));
  // Twice the settle window: long enough to be taken half-written by the settle window alone,
  // well within the unfinished file's.
  await sleep(LIMITS.watchSettleMs * 2);
  t.same(run.taken, [], 'not taken while its end marker is missing');
  fs.writeSync(fd, whole.subarray(1000));
  fs.closeSync(fd);
  await until('the photo taken', () => run.taken.length >= 1);
  await sleep(1500); // time for a second take to show
  run.interrupt();
  await watching;
  t.same(run.taken.map((x) => [x.input, x.size]), [['paused/paused.jpg', whole.length]], 'taken once, whole');
});

t.test('a photo whose end marker never comes is still taken once it has held still for the longer wait', async (t) => {
  const hot = path.join(ROOT, 'endless');
  const out = path.join(hot, 'out');
  fs.mkdirSync(out, { recursive: true });
  const run = new RecordingRun();
  const watching = startWatch(run, hot, out);
  const cut = photo(4000).subarray(0, 3000);
  fs.writeFileSync(path.join(hot, 'cut.jpg'), cut);
  await until('the cut photo taken', () => run.taken.length >= 1);
  run.interrupt();
  await watching;
  t.same(run.taken.map((x) => [x.input, x.size]), [['endless/cut.jpg', cut.length]], 'taken as it is (the run then refuses it as truncated)');
});

t.test('an interrupt ends the longer wait of an unfinished photo at once, taking nothing', async (t) => {
  const hot = path.join(ROOT, 'stopped');
  const out = path.join(hot, 'out');
  fs.mkdirSync(out, { recursive: true });
  const run = new RecordingRun();
  const watching = startWatch(run, hot, out);
  await sleep(500);
  fs.writeFileSync(path.join(hot, 'cut.jpg'), photo(5000).subarray(0, 3000));
  await sleep(LIMITS.watchSettleMs * 2); // past the settle window: in the longer wait now
  run.interrupt();
  await watching;
  t.same(run.taken, [], 'nothing taken');
});
