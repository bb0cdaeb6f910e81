/**
 * `cutout remove --watch`: after the inputs, the input folders and glob bases are watched, and
 * each new or changed image goes through the same per-item unit as the list (batch.ts), once it
 * is completely written. chokidar, not Node's fs.watch: fs.watch's recursive mode needs Node 20's
 * Linux support to hold (it was added late and reported racy), it reports renames and writes as
 * bare events with no settled size, and gives no way to tell a file still being copied in from a
 * finished one; chokidar's awaitWriteFinish polls the size until it holds still (LIMITS.watchSettleMs).
 *
 * The window between the first scan and the watch (docs/internals.md): chokidar reports nothing
 * of what it finds before its 'ready' (ignoreInitial), and it waits for a write to finish only
 * after 'ready'. So files that land after the list was scanned but before the watch holds would
 * be lost. Once the watch is ready, the folders are scanned again and every image that this run
 * did not take as it is now (size and time, BatchRun.tookAsIs) is taken once its size holds
 * still: from 'ready' on the watch sees what comes, and the rescan sees what came before. A
 * folder that appears later is scanned the same way once chokidar reports it, for the files
 * copied in with it before its own watch held.
 */
import path from 'node:path';
import fs, { type Stats } from 'node:fs';
import { LIMITS } from '../limits.js';
import type { Format } from '../options.js';
import { excludeMatcher, globPath, matchesGlob } from './glob-match.js';
import { expandInputs, globBase, isGlob, isImageName, isWithin, outputPathFor, type OutputPlan } from './inputs.js';
import type { PlannedItem } from './remove-item.js';
import { missingEndMarker, sniffFormat } from '../pipeline/decode.js';

/**
 * How long a file that looks unfinished (the end marker its format requires, JPEG's FF D9, PNG's
 * IEND, GIF's trailer, not there yet) must hold still before it is taken: a copy over a network
 * share or a slow card reader pauses for longer than LIMITS.watchSettleMs now and then (issue 51).
 * A JPEG that lacks only its end marker is read whole (decode.ts), just later; one that never
 * becomes whole fails as truncated once this has passed, and is taken again if it changes.
 */
export const WATCH_UNFINISHED_SETTLE_MS = 5_000;

export interface WatchOptions {
  inputs: string[];
  recursive: boolean;
  exclude: string[];
  outputPlan: OutputPlan;
  suffix: string;
  format: Format | 'zip';
  /** A file's own output format when it is an animation and the run named none (animated WebP). */
  animationFormat: (file: string) => Promise<Format | null>;
  quiet: boolean;
}

/** A watched input: a folder (its images, deeper with --recursive), or a glob under its base. */
interface WatchTarget {
  base: string;
  glob: string | null;
}

function watchTargets(inputs: string[]): WatchTarget[] {
  return inputs.flatMap((arg): WatchTarget[] => {
    const stat = statOrNull(arg);
    if (stat?.isDirectory()) return [{ base: arg, glob: null }];
    if (!stat && isGlob(arg)) return [{ base: globBase(arg), glob: arg }];
    return []; // a file (or stdin) was done with the list
  });
}

function statOrNull(p: string): Stats | null {
  try {
    return fs.statSync(p);
  } catch {
    return null;
  }
}

/** What the watcher needs of the batch run (BatchRun): narrow, so that a test can drive it. */
export interface WatchedRun {
  readonly interrupted: boolean;
  isUnchanged(planned: PlannedItem): Promise<boolean>;
  tookAsIs(file: string, stats: Stats): boolean;
  process(planned: PlannedItem): Promise<void>;
  untilInterrupted(): Promise<void>;
}

/** Resolves once `file`'s size and time have held still for `settleMs` (null: it went away). */
async function settled(file: string, settleMs: number, pollMs = 100): Promise<Stats | null> {
  let last = statOrNull(file);
  let stillSince = Date.now();
  while (last) {
    if (Date.now() - stillSince >= settleMs) return last;
    await new Promise((resolve) => setTimeout(resolve, pollMs));
    const now = statOrNull(file);
    if (!now || now.size !== last.size || now.mtimeMs !== last.mtimeMs) stillSince = Date.now();
    last = now;
  }
  return null;
}

/**
 * Watches until SIGINT or SIGTERM, feeding each settled image to `run`. Only folders are watched
 * (a file named on the command line was done with the list); the output folder never is.
 */
export async function watchInputs(run: WatchedRun, opts: WatchOptions): Promise<void> {
  const targets = watchTargets(opts.inputs);
  if (!targets.length) {
    if (!opts.quiet) process.stderr.write('cutout: --watch: no folder or glob among the inputs; nothing to watch\n');
    return;
  }
  const take = taker(run, targets, opts);
  const { watch } = await import('chokidar');
  const watcher = watch(targets.map((t) => t.base), {
    ignoreInitial: true,
    awaitWriteFinish: { stabilityThreshold: LIMITS.watchSettleMs, pollInterval: 100 },
    depth: isDeep(targets, opts) ? undefined : 0,
    ignored: ignoredBy(targets, opts),
  });
  const rescans = new Set<Promise<void>>();
  const rescan = (roots: string[]) => {
    const done = rescanFor(run, take, roots, { ...opts, recursive: isDeep(targets, opts) }).finally(() => rescans.delete(done));
    rescans.add(done);
  };
  watcher.on('add', take.file).on('change', take.file);
  watcher.on('addDir', (dir) => rescan([dir]));
  watcher.on('error', (err) => process.stderr.write(`cutout: watching: ${(err as Error).message}\n`));
  await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  rescan(targets.map((t) => t.glob ?? t.base));
  if (!opts.quiet) process.stderr.write(`cutout: watching ${targets.map((t) => t.glob ?? t.base).join(', ')} (Ctrl-C to stop)\n`);
  await run.untilInterrupted();
  await watcher.close();
  await Promise.all([...rescans]);
  await take.drained();
}

const isDeep = (targets: WatchTarget[], opts: WatchOptions) => opts.recursive || targets.some((t) => t.glob?.includes('**'));

/** The output folder when it lies strictly inside a watched folder (then it is left out), else null. */
function outputDirInside(targets: WatchTarget[], opts: WatchOptions): string | null {
  if (opts.outputPlan.kind !== 'directory') return null;
  const outDir = path.resolve(opts.outputPlan.path!);
  return targets.some((t) => path.resolve(t.base) === outDir || isWithin(t.base, outDir)) ? null : outDir;
}

/** chokidar's `ignored`: the output folder, hidden names (our temporary files), and non-images. */
function ignoredBy(targets: WatchTarget[], opts: WatchOptions): (p: string, stats?: Stats) => boolean {
  const outDir = outputDirInside(targets, opts);
  return (p, stats) => {
    const abs = path.resolve(p);
    if (outDir && isWithin(abs, outDir)) return true;
    if (targets.some((t) => path.resolve(t.base) === abs)) return false;
    if (path.basename(p).startsWith('.')) return true; // our temporary files, hidden folders
    return Boolean(stats?.isFile()) && !isImageName(path.basename(p));
  };
}

/**
 * Scans `roots` (watched folders, their new sub-folders, or globs; deeper when `opts.recursive`)
 * and takes each image the run has not taken as it is now, once its size holds still. What is
 * found and belongs to no input (deeper than a folder without --recursive, outside a glob) is
 * left by the taker.
 */
async function rescanFor(run: WatchedRun, take: Taker, roots: string[], opts: WatchOptions): Promise<void> {
  const outputDir = opts.outputPlan.kind === 'directory' ? opts.outputPlan.path : null;
  const { items } = await expandInputs(roots, { recursive: opts.recursive, outputDir });
  await Promise.all(items.map(async ({ path: file }) => {
    const now = statOrNull(file);
    if (!now || run.tookAsIs(file, now) || run.interrupted) return;
    if (await settled(file, LIMITS.watchSettleMs)) take.file(file);
  }));
}

/** Whether `file` lacks the end marker its format requires (read from its first and last bytes). */
async function looksUnfinished(file: string): Promise<boolean> {
  let handle: fs.promises.FileHandle | null = null;
  try {
    handle = await fs.promises.open(file, 'r');
    const { size } = await handle.stat();
    const head = Buffer.alloc(Math.min(size, 16));
    await handle.read(head, 0, head.length, 0);
    const tail = Buffer.alloc(Math.min(size, 32));
    await handle.read(tail, 0, tail.length, size - tail.length);
    const format = sniffFormat(head);
    return format !== null && missingEndMarker(tail, format);
  } catch {
    return false; // gone or unreadable: the item says so
  } finally {
    await handle?.close();
  }
}

/**
 * For a file that looked unfinished once it held still: resolves true once it looks finished and
 * has held still for the settle window again (its writer came back), or has held still for
 * WATCH_UNFINISHED_SETTLE_MS whatever it looks like; false when it went away or `stop()` said so.
 */
async function finishedOrLongStill(file: string, stop: () => boolean, pollMs = 100): Promise<boolean> {
  let last = statOrNull(file);
  let stillSince = Date.now();
  let checked = true; // looked unfinished as it is now
  while (last && !stop()) {
    await new Promise((resolve) => setTimeout(resolve, pollMs));
    const now = statOrNull(file);
    if (!now) return false;
    if (now.size !== last.size || now.mtimeMs !== last.mtimeMs) {
      stillSince = Date.now();
      checked = false;
    }
    last = now;
    const still = Date.now() - stillSince;
    if (still >= WATCH_UNFINISHED_SETTLE_MS) return true;
    if (!checked && still >= LIMITS.watchSettleMs) {
      checked = true;
      if (!(await looksUnfinished(file))) return true;
    }
  }
  return false;
}

interface Taker {
  /** Takes a settled file: planned and processed, unless the run took it as it is already. */
  file: (file: string) => void;
  /** Resolves once nothing taken is in flight. */
  drained: () => Promise<void>;
}

/** Feeds files to the run, one at a time per file: a file that changes while in flight is taken once more after. */
function taker(run: WatchedRun, targets: WatchTarget[], opts: WatchOptions): Taker {
  const isExcluded = excludeMatcher(opts.exclude);
  const outDir = outputDirInside(targets, opts);
  /** The target a file belongs to (its output layout's root), or null when no input takes it. */
  const owner = (file: string): WatchTarget | null =>
    targets.find((t) => {
      if (t.glob) return matchesGlob(globPath(file), t.glob);
      if (!isWithin(file, t.base)) return false;
      return opts.recursive || path.resolve(path.dirname(file)) === path.resolve(t.base);
    }) ?? null;
  const pending = new Set<string>();
  /** Files that changed again while being processed: taken once more after. */
  const again = new Set<string>();
  const inFlight = new Set<Promise<void>>();
  const file = (f: string) => {
    if (run.interrupted || !isImageName(path.basename(f)) || isExcluded(f) || (outDir && isWithin(f, outDir))) return;
    if (pending.has(f)) {
      again.add(f);
      return;
    }
    const target = owner(f);
    if (!target) return;
    const item = { path: f, root: target.glob ? globBase(target.glob) : target.base };
    pending.add(f);
    const task = (async () => {
      const plannedAs = (own: Format | null) => ({ item, output: outputPathFor(item, opts.outputPlan, own ?? opts.format, opts.suffix), ...(own ? { format: own } : {}) });
      let planned = plannedAs(await opts.animationFormat(f));
      const now = statOrNull(f);
      if (!now || run.tookAsIs(f, now)) return; // seen by both the rescan and an event, or gone
      if (await run.isUnchanged(planned)) return; // a touch, or a copy of the same bytes
      // Still being written by a writer that paused? Given longer to hold still (a change meanwhile
      // is taken by its own event, after this take, and left then as this take saw it).
      if (await looksUnfinished(f)) {
        if (!(await finishedOrLongStill(f, () => run.interrupted)) || run.interrupted) return;
        // Read whole now: an animation is told by its frames, which a half-written file hides.
        planned = plannedAs(await opts.animationFormat(f));
      }
      await run.process(planned);
    })().finally(() => {
      pending.delete(f);
      inFlight.delete(task);
      if (again.delete(f)) file(f);
    });
    inFlight.add(task);
  };
  const drained = async () => {
    while (inFlight.size) await Promise.all([...inFlight]);
  };
  return { file, drained };
}
