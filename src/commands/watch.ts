/**
 * `cutout remove --watch`: after the inputs, the input folders and glob bases are watched, and
 * each new or changed image goes through the same per-item unit as the list (batch.ts), once it
 * is completely written. chokidar, not Node's fs.watch: fs.watch's recursive mode needs Node 20's
 * Linux support to hold (it was added late and reported racy), it reports renames and writes as
 * bare events with no settled size, and gives no way to tell a file still being copied in from a
 * finished one; chokidar's awaitWriteFinish polls the size until it holds still (LIMITS.watchSettleMs).
 */
import path from 'node:path';
import fs, { type Stats } from 'node:fs';
import { LIMITS } from '../limits.js';
import type { Format } from '../options.js';
import type { BatchRun } from './batch.js';
import { excludeMatcher, globPath, matchesGlob } from './glob-match.js';
import { globBase, isGlob, isImageName, outputPathFor, type OutputPlan } from './inputs.js';

export interface WatchOptions {
  inputs: string[];
  recursive: boolean;
  exclude: string[];
  outputPlan: OutputPlan;
  suffix: string;
  format: Format | 'zip';
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

/** Whether `dir` is `p` or one of its parents. */
function within(p: string, dir: string): boolean {
  const rel = path.relative(dir, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * Watches until SIGINT or SIGTERM, feeding each settled image to `run`. Only folders are watched
 * (a file named on the command line was done with the list); the output folder never is.
 */
export async function watchInputs(run: BatchRun, opts: WatchOptions): Promise<void> {
  const targets = watchTargets(opts.inputs);
  if (!targets.length) {
    if (!opts.quiet) process.stderr.write('cutout: --watch: no folder or glob among the inputs; nothing to watch\n');
    return;
  }
  const outDir = opts.outputPlan.kind === 'directory' ? path.resolve(opts.outputPlan.path!) : null;
  const isExcluded = excludeMatcher(opts.exclude);
  const deep = opts.recursive || targets.some((t) => t.glob?.includes('**'));

  /** The target a file belongs to (its output layout's root), or null when no input takes it. */
  const owner = (file: string): WatchTarget | null =>
    targets.find((t) => {
      if (t.glob) return matchesGlob(globPath(file), t.glob);
      if (!within(path.resolve(file), path.resolve(t.base))) return false;
      return opts.recursive || path.resolve(path.dirname(file)) === path.resolve(t.base);
    }) ?? null;

  const ignored = (p: string, stats?: Stats): boolean => {
    const abs = path.resolve(p);
    if (outDir && within(abs, outDir)) return true;
    if (targets.some((t) => path.resolve(t.base) === abs)) return false;
    if (path.basename(p).startsWith('.')) return true; // our temporary files, hidden folders
    return Boolean(stats?.isFile()) && !isImageName(path.basename(p));
  };

  const pending = new Set<string>();
  /** Files that changed again while being processed: taken once more after. */
  const again = new Set<string>();
  const inFlight = new Set<Promise<void>>();
  const take = (file: string) => {
    if (run.interrupted || !isImageName(path.basename(file)) || isExcluded(file)) return;
    if (pending.has(file)) {
      again.add(file);
      return;
    }
    const target = owner(file);
    if (!target) return;
    const root = target.glob ? globBase(target.glob) : target.base;
    const item = { path: file, root };
    const planned = { item, output: outputPathFor(item, opts.outputPlan, opts.format, opts.suffix) };
    pending.add(file);
    const task = (async () => {
      if (await run.isUnchanged(planned)) return; // a touch, or a copy of the same bytes
      await run.process(planned);
    })().finally(() => {
      pending.delete(file);
      inFlight.delete(task);
      if (again.delete(file)) take(file);
    });
    inFlight.add(task);
  };

  const { watch } = await import('chokidar');
  const watcher = watch(targets.map((t) => t.base), {
    ignoreInitial: true,
    awaitWriteFinish: { stabilityThreshold: LIMITS.watchSettleMs, pollInterval: 100 },
    depth: deep ? undefined : 0,
    ignored,
  });
  watcher.on('add', take).on('change', take);
  watcher.on('error', (err) => process.stderr.write(`cutout: watching: ${(err as Error).message}\n`));
  await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  if (!opts.quiet) process.stderr.write(`cutout: watching ${targets.map((t) => t.glob ?? t.base).join(', ')} (Ctrl-C to stop)\n`);
  await run.untilInterrupted();
  await watcher.close();
  while (inFlight.size) await Promise.all([...inFlight]);
}
