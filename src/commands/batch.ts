/**
 * The batch processor of `cutout remove` (cli-contract, "The batch processor"): the drivers that
 * feed the per-item unit (remove-item.ts) from the list of inputs and, with --watch, from a
 * watched folder (watch.ts); the manifest's decisions before a run; the interrupt (SIGINT or
 * SIGTERM: no new input starts, those in flight finish, exit 130); and the summary line.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { oneLine } from '../errors.js';
import { Manifest, type OutputOptions } from './manifest.js';
import { processItem, sha256Of, type ItemContext, type ItemReport, type PlannedItem } from './remove-item.js';
import { isInputItself, removeStagedAndDie } from './output-files.js';
import type { Reporter } from './progress.js';
import { UsageError } from './usage-error.js';

export interface BatchFlags {
  manifest?: string;
  force?: boolean;
  watch?: boolean;
  exclude?: string[];
  dryRun?: boolean;
}

export function addBatchFlags(command: Command): Command {
  return command
    .option('--manifest <file>', 'a JSON-lines record of each input handled; a rerun skips inputs whose bytes, options and output are unchanged since it')
    .option('--force', 'with --manifest: redo every input')
    .option('--watch', 'after the inputs, keep watching the input folders and process each new or changed image once completely written, until Ctrl-C')
    .option('--exclude <glob>', 'leave out matching inputs (repeatable); a glob without / matches any name in the path', (value: string, previous: string[] = []) => [...previous, value])
    .option('--dry-run', 'print what would be processed and what skipped, with counts; write nothing')
    .addHelpText('after', BATCH_HELP);
}

const BATCH_HELP = `
Batches: Ctrl-C (or SIGTERM) starts no new image and lets those in flight finish (press again to
stop at once), then says what is done and left and exits with 130; with --manifest the same
command continues. A batch ends with a summary line (done, skipped, failed, time, images/s).`;

/**
 * Whether the model may start before the inputs are planned (cold start): not for a dry run,
 * and not when a manifest exists without --force, where every input may be done already and a
 * rerun must not load the model at all. names.ts decides the same from the raw arguments for cli.ts.
 */
export function startsModelAtOnce(flags: BatchFlags): boolean {
  return !flags.dryRun && !(flags.manifest && !flags.force && fs.existsSync(flags.manifest));
}

/** The inputs of a run split by the manifest: those to process, those done already, those adopted. */
export interface BatchPlan {
  todo: PlannedItem[];
  unchanged: PlannedItem[];
  /** Outputs made before the manifest that this run takes as done (see adoptable). */
  adopted: { planned: PlannedItem; sha256: string }[];
  /**
   * --watch without --manifest (and without --overwrite or --skip-existing): photos whose output
   * is there under the name this run gives it and newer than the photo, taken as done (a hot
   * folder restarted; see keepsNewerOutputs).
   */
  madeBefore: PlannedItem[];
  manifest: Manifest | null;
}

/**
 * Whether a run takes an output that is there, newer than its photo, as done without a manifest:
 * a watch (a hot folder is restarted as a matter of course, and its outputs are the only record of
 * what it did), unless --overwrite or --skip-existing says what to do with existing outputs. The
 * rule is the one by which a run with --manifest adopts outputs made before it (adoptable).
 */
export function keepsNewerOutputs(flags: BatchFlags, existing: 'refuse' | 'skip' | 'overwrite'): boolean {
  return Boolean(flags.watch) && !flags.manifest && existing === 'refuse';
}

/**
 * Splits the inputs by the manifest. Only inputs whose last line could match, or whose output
 * could be adopted, are read and hashed (a first run over an empty folder hashes nothing here;
 * the unit hashes the bytes it processes).
 */
export async function planBatch(planned: PlannedItem[], flags: BatchFlags, options: OutputOptions, existing: 'refuse' | 'skip' | 'overwrite' = 'refuse'): Promise<BatchPlan> {
  if (!flags.manifest) {
    if (!keepsNewerOutputs(flags, existing)) return { todo: planned, unchanged: [], adopted: [], madeBefore: [], manifest: null };
    const made = (p: PlannedItem) => !p.shadowedBy && adoptable(p);
    return { todo: planned.filter((p) => !made(p)), unchanged: [], adopted: [], madeBefore: planned.filter(made), manifest: null };
  }
  const manifest = Manifest.load(flags.manifest);
  if (flags.force) return { todo: planned, unchanged: [], adopted: [], madeBefore: [], manifest };
  const plan: BatchPlan = { todo: [], unchanged: [], adopted: [], madeBefore: [], manifest };
  const { default: pLimit } = await import('p-limit');
  const limit = pLimit(8);
  const verdicts = await Promise.all(planned.map((p) => limit(() => verdictOf(p, manifest, options))));
  planned.forEach((p, i) => {
    const verdict = verdicts[i];
    if (verdict === 'todo') plan.todo.push(p);
    else if (verdict === 'unchanged') plan.unchanged.push(p);
    else plan.adopted.push({ planned: p, sha256: verdict.adopt });
  });
  return plan;
}

async function verdictOf(p: PlannedItem, manifest: Manifest, options: OutputOptions): Promise<'todo' | 'unchanged' | { adopt: string }> {
  if (p.shadowedBy) return 'todo';
  const line = manifest.candidate(p.item.path, p.output, options);
  // An output the in-flight list names was being put in place by a run that was killed: redone, not adopted.
  const adopt = !line && !manifest.hasLine(p.item.path) && !manifest.records(p.output) && adoptable(p);
  if (!line && !adopt) return 'todo';
  const bytes = await fs.promises.readFile(p.item.path).catch(() => null);
  if (bytes === null) return 'todo';
  const sha256 = sha256Of(bytes);
  if (line) return sha256 === line.sha256 ? 'unchanged' : 'todo';
  return { adopt: sha256 };
}

/**
 * Whether an output that the manifest does not know is taken as done: a run that began without
 * --manifest (then Ctrl-C) continued with it. The output has the name this run gives it, so it
 * is complete (outputs are renamed into place whole), and it is newer than its photo (a photo
 * changed since is redone, and then its output is refused unless --overwrite). Its line says
 * `"adopted": true`; --force redoes it.
 */
function adoptable(p: PlannedItem): boolean {
  if (!p.output || p.item.path === '-') return false;
  try {
    const output = fs.statSync(p.output);
    const input = fs.statSync(p.item.path);
    return output.isFile() && input.isFile() && output.mtimeMs >= input.mtimeMs && !isInputItself(p.output, p.item.path);
  } catch {
    return false;
  }
}

/** Refusals of flags that a batch cannot honour. */
export function checkBatchFlags(inputs: string[], flags: BatchFlags & { out?: string }): void {
  const stdin = inputs.includes('-') || flags.out === '-';
  if (flags.manifest && stdin) throw new UsageError('--manifest records files: it cannot be combined with - (stdin or stdout)');
  if (flags.watch && stdin) throw new UsageError('--watch watches folders: it cannot be combined with - (stdin or stdout)');
  if (flags.force && !flags.manifest) throw new UsageError('--force redoes what a manifest records: give --manifest FILE');
}

/**
 * The interrupt: the first SIGINT or SIGTERM lets the images in flight finish and starts no
 * other; a second stops at once (temporary files removed, the process ended by the signal).
 */
export class Interrupt {
  signal: NodeJS.Signals | null = null;
  private readonly listeners: (() => void)[] = [];
  private readonly handler = (signal: NodeJS.Signals) => {
    if (this.signal) return removeStagedAndDie(signal);
    this.signal = signal;
    for (const listener of this.listeners) listener();
  };

  install(): this {
    process.on('SIGINT', this.handler);
    process.on('SIGTERM', this.handler);
    return this;
  }

  onSignal(listener: () => void): void {
    this.listeners.push(listener);
  }

  uninstall(): void {
    process.off('SIGINT', this.handler);
    process.off('SIGTERM', this.handler);
  }
}

export interface BatchTally {
  done: number;
  skipped: number;
  failed: number;
  /** Inputs not started because of an interrupt. */
  left: number;
  /** Done cutouts flagged by --review-below. */
  review: number;
}

export interface BatchRunOptions {
  /** The items' shared context, made on the first item that needs it (an unchanged rerun makes none). */
  context: () => Promise<ItemContext>;
  reporter: Reporter;
  manifest: Manifest | null;
  options: OutputOptions;
  concurrency: number;
  interrupt: Interrupt;
  /** Called once every item of the list is past its model call (not when watching: more may come). */
  releaseModel?: () => void;
  /** --force: every input is redone, and the output it is named to replace is replaced. */
  force?: boolean;
  /** --review-below T: a done cutout whose confidence is below T is flagged for review. */
  reviewBelow?: number;
  /** An output there and newer than its photo is taken as done without a manifest (keepsNewerOutputs). */
  keepsNewerOutputs?: boolean;
}

/** Feeds items to the per-item unit, `concurrency` at a time, and counts what became of them. */
export class BatchRun {
  readonly tally: BatchTally = { done: 0, skipped: 0, failed: 0, left: 0, review: 0 };
  /** Outputs written by this run: a changed photo seen again by the watcher may replace its own. */
  private readonly written = new Set<string>();
  /** Each input this run took, by absolute path, with its size and time when taken (the watcher's dedup). */
  private readonly taken = new Map<string, string>();
  /** Inputs refused because their output exists: the closing hint names the flags for them. */
  private outputsInTheWay = 0;
  /**
   * Inputs (absolute paths) whose last outcome in this run is a failure. An input counts once in
   * the summary, by its last outcome: a photo the watcher took while it was still being written
   * (a copy that paused for longer than the settle window) fails as truncated, is taken again when
   * it changes, and once done it is no failure of the run.
   */
  private readonly failing = new Set<string>();
  private limit: ((task: () => Promise<void>) => Promise<void>) | null = null;

  constructor(private readonly opts: BatchRunOptions) {}

  get interrupted(): boolean {
    return this.opts.interrupt.signal !== null;
  }

  fail(): void {
    this.tally.failed++;
    // Set at the first failure, not at the end: a reader that closes stdout early ends the run
    // with the exit code so far (cli.ts), which must already say 1.
    process.exitCode = 1;
  }

  /** An input that had failed is done now: its failure is taken back (see `failing`). */
  private unfail(): void {
    this.tally.failed--;
    if (this.tally.failed === 0 && process.exitCode === 1) process.exitCode = 0;
  }

  /** A line for an input that failed before it could be an item (nothing matched, an unreadable folder). */
  failed(report: ItemReport): void {
    this.fail();
    this.opts.reporter.done(report);
  }

  /** --review-below T: flags `report` when its confidence is below T, and counts it. */
  private review(report: ItemReport): void {
    const confidence = report.fields?.confidence;
    if (this.opts.reviewBelow !== undefined && confidence !== undefined && confidence < this.opts.reviewBelow) {
      report.review = true;
      this.tally.review++;
    }
  }

  /**
   * Inputs the manifest says are done: one JSON line each with --json, one count line on stderr.
   * With --review-below each is judged by the confidence its manifest line recorded (it is not
   * redone): its line carries that confidence, and one below the threshold is flagged as a done
   * cutout is (the review line, `"review": true`, the summary's count).
   */
  reportUnchanged(items: PlannedItem[], quiet: boolean): void {
    for (const p of items) {
      this.tally.skipped++;
      const report: ItemReport = { input: p.item.path, output: p.output, width: null, height: null, ms: 0, skipped: true, error: null };
      if (this.opts.reviewBelow !== undefined) {
        const recorded = this.opts.manifest?.lineOf(p.item.path)?.confidence;
        if (typeof recorded === 'number') {
          report.fields = { confidence: recorded };
          this.review(report);
        }
      }
      this.opts.reporter.done(report, { silent: true });
    }
    if (items.length && !quiet) process.stderr.write(`cutout: ${items.length} unchanged since ${this.opts.manifest!.file}, skipped\n`);
  }

  private async slot(task: () => Promise<void>): Promise<void> {
    if (!this.limit) {
      const { default: pLimit } = await import('p-limit');
      this.limit ??= pLimit(this.opts.concurrency);
    }
    return this.limit(task);
  }

  /**
   * Whether the manifest says this input is done with these bytes, options and output (the
   * watcher's check); without a manifest, with keepsNewerOutputs, whether its output is there and
   * newer than it and was not written by this run (a photo changed since this run's output is redone).
   */
  async isUnchanged(planned: PlannedItem): Promise<boolean> {
    const { manifest, options } = this.opts;
    if (!manifest) return Boolean(this.opts.keepsNewerOutputs) && !planned.shadowedBy && !(planned.output && this.written.has(planned.output)) && adoptable(planned);
    const line = manifest?.candidate(planned.item.path, planned.output, options);
    if (!line) return false;
    const bytes = await fs.promises.readFile(planned.item.path).catch(() => null);
    return bytes !== null && sha256Of(bytes) === line.sha256;
  }

  /** Outputs made before the manifest, taken as done (planBatch): a line each, counted as skipped. */
  adopt(adopted: BatchPlan['adopted'], quiet: boolean): void {
    const { manifest, options, reporter } = this.opts;
    for (const { planned, sha256 } of adopted) {
      const report: ItemReport = { input: planned.item.path, output: planned.output, width: null, height: null, ms: 0, skipped: true, error: null };
      manifest!.append(report, sha256, options, true);
      this.tally.skipped++;
      reporter.done(report, { silent: true });
    }
    if (adopted.length && !quiet) {
      process.stderr.write(`cutout: ${adopted.length} outputs made before ${manifest!.file} (named as this run names them, newer than their photos) taken as done; --force redoes them\n`);
    }
  }

  /** Photos whose output was there and newer than them (keepsNewerOutputs): a line each, counted as skipped. */
  reportMadeBefore(items: PlannedItem[], quiet: boolean): void {
    for (const p of items) {
      this.tally.skipped++;
      this.opts.reporter.done({ input: p.item.path, output: p.output, width: null, height: null, ms: 0, skipped: true, error: null }, { silent: true });
    }
    if (items.length && !quiet) {
      process.stderr.write(`cutout: ${items.length} photo${items.length === 1 ? ' has its output' : 's have their outputs'} already there, newer than ${items.length === 1 ? 'it' : 'them'}: taken as done; --overwrite redoes them\n`);
    }
  }

  /** Named inputs left out as cutout's own outputs (inputs.ts): counted as skipped. */
  reportOwnOutputs(files: string[]): void {
    for (const input of files) {
      this.tally.skipped++;
      this.opts.reporter.done({ input, output: null, width: null, height: null, ms: 0, skipped: true, error: null }, { silent: true });
    }
  }

  /**
   * Whether this run took `file` already as it is now (same size and modification time): the
   * watcher's rescan and its events then leave it alone; a file changed since is taken again.
   */
  tookAsIs(file: string, stats: fs.Stats): boolean {
    return this.taken.get(path.resolve(file)) === stateOf(stats);
  }

  private noteTaken(file: string): void {
    if (file === '-') return;
    try {
      this.taken.set(path.resolve(file), stateOf(fs.statSync(file)));
    } catch {
      // gone or unreadable: the item fails with its own line, and nothing is noted
    }
  }

  /** Resolves at the first SIGINT or SIGTERM (the end of a watch). */
  untilInterrupted(): Promise<void> {
    return new Promise((resolve) => (this.interrupted ? resolve() : this.opts.interrupt.onSignal(resolve)));
  }

  /** Runs one item when a slot is free, unless an interrupt came first (then it is left). */
  process(planned: PlannedItem, afterModel?: () => void): Promise<void> {
    return this.slot(async () => {
      if (this.interrupted) {
        this.tally.left++;
        afterModel?.();
        return;
      }
      const { reporter, manifest, options } = this.opts;
      this.noteTaken(planned.item.path);
      const key = planned.item.path === '-' ? null : path.resolve(planned.item.path);
      // Failed before this take began (an earlier take of the same file, by the list or the watcher).
      const failedBefore = key !== null && this.failing.has(key);
      reporter.start(planned.item.path);
      const ctx = await this.opts.context();
      const replaceOutput = Boolean(this.opts.force) || manifest?.records(planned.output) || (planned.output !== null && this.written.has(planned.output));
      // A done line is written the moment its output is in place, the output noted in the
      // in-flight list just before (manifest.ts: a kill -9 between the two is redone, not refused);
      // a failure's line after the item.
      let recorded = false;
      const onOutputInPlace = manifest ? (line: ItemReport, sha256: string) => {
        manifest.append(line, sha256, options);
        recorded = true;
      } : undefined;
      const beforeOutputInPlace = manifest ? (output: string) => manifest.placing(output) : undefined;
      const { report, sha256, reason } = await processItem(ctx, planned, { afterModel, replaceOutput, onOutputInPlace, beforeOutputInPlace });
      if (reason === 'output_exists') this.outputsInTheWay++;
      if (report.error) {
        if (!failedBefore) this.fail(); // failed again: still one input failed
        if (key) this.failing.add(key);
      } else {
        // Its last outcome counts: a failure of an earlier take is taken back.
        if (key && failedBefore && this.failing.delete(key)) this.unfail();
        if (report.skipped) this.tally.skipped++;
        else this.tally.done++;
      }
      if (!report.error && !report.skipped) {
        if (report.output) this.written.add(report.output);
        this.review(report);
      }
      if (manifest && !report.skipped && (report.error || !recorded)) manifest.append(report, sha256, options);
      reporter.done(report);
    });
  }

  /** Drives a list of items; the model is let go once every one of them is past its model call. */
  async drive(items: PlannedItem[]): Promise<void> {
    let needingModel = items.length;
    const doneWithModel = () => {
      if (--needingModel === 0) this.opts.releaseModel?.();
    };
    await Promise.all(items.map((p) => this.process(p, once(doneWithModel))));
  }

  /** The summary line (and with --json its object); the exit code of the batch. */
  finish(opts: { json: boolean; watching: boolean; hint: string }): { code: number; summary: string } {
    const { done, skipped, failed, left, review } = this.tally;
    // The whole command's time, from the process's start: planning and hashing included.
    const seconds = performance.now() / 1000;
    const perSecond = seconds > 0 ? done / seconds : 0;
    const parts = [`${done} done`, `${skipped} skipped`, `${failed} failed`];
    if (left) parts.push(`${left} left`);
    if (this.opts.reviewBelow !== undefined) parts.push(`${review} to review (confidence below ${this.opts.reviewBelow})`);
    const summary = `${parts.join(', ')} in ${seconds.toFixed(1)} s (${perSecond.toFixed(2)} images/s)`;
    if (opts.json) {
      const body = { done, skipped, failed, left, ...(this.opts.reviewBelow !== undefined ? { review } : {}), seconds: Number(seconds.toFixed(3)), images_per_second: Number(perSecond.toFixed(3)), interrupted: this.interrupted };
      process.stdout.write(JSON.stringify({ summary: body }) + '\n');
    }
    if (this.outputsInTheWay) {
      const flags = this.opts.manifest ? '--skip-existing to leave them, or --overwrite to replace them' : '--skip-existing to leave them, --overwrite to replace them, or --manifest FILE to take them as done and redo only what changes';
      process.stderr.write(`cutout: ${this.outputsInTheWay} output${this.outputsInTheWay === 1 ? '' : 's'} already there; run it again with ${flags}\n`);
    }
    if (this.interrupted && !opts.watching) {
      process.stderr.write(oneLine(`cutout: interrupted (${this.opts.interrupt.signal}): ${done} done, ${left} left; ${opts.hint}`) + '\n');
      return { code: 130, summary };
    }
    return { code: failed ? 1 : 0, summary };
  }
}

/** A file's state as the watcher compares it: size and modification time. */
function stateOf(stats: fs.Stats): string {
  return `${stats.size}:${stats.mtimeMs}`;
}

/** `fn`, called at most once. */
export function once(fn: () => void): () => void {
  let called = false;
  return () => {
    if (called) return;
    called = true;
    fn();
  };
}

/** `--dry-run`: each input and what a run would do with it, then the counts; nothing is written. */
export function printDryRun(batch: BatchPlan, unusable: string[], opts: { json: boolean; existing: 'refuse' | 'skip' | 'overwrite' }): number {
  const counts = { process: 0, skip: 0, fail: unusable.length };
  const say = (input: string, output: string | null, action: 'process' | 'skip' | 'fail', reason: string | null) => {
    if (opts.json) process.stdout.write(JSON.stringify({ input, output, action, reason }) + '\n');
    else process.stdout.write(oneLine(`${action} ${input}${output && action === 'process' ? ` -> ${output}` : ''}${reason ? ` (${reason})` : ''}`) + '\n');
  };
  for (const input of unusable) say(input, null, 'fail', 'nothing matched, or not readable');
  for (const p of batch.unchanged) {
    counts.skip++;
    say(p.item.path, p.output, 'skip', 'unchanged since the manifest');
  }
  for (const { planned: p } of batch.adopted) {
    counts.skip++;
    say(p.item.path, p.output, 'skip', 'output made before the manifest, would be taken as done');
  }
  for (const p of batch.madeBefore) {
    counts.skip++;
    say(p.item.path, p.output, 'skip', 'output there and newer than the photo, would be taken as done');
  }
  for (const p of batch.todo) {
    const verdict = dryVerdict(p, batch.manifest, opts.existing);
    counts[verdict.action]++;
    say(p.item.path, p.output, verdict.action, verdict.reason);
  }
  const line = `dry run: ${counts.process} to process, ${counts.skip} to skip, ${counts.fail} would fail; nothing was written`;
  if (opts.json) process.stdout.write(JSON.stringify({ summary: { dry_run: true, ...counts } }) + '\n');
  process.stderr.write(`cutout: ${line}\n`);
  return 0;
}

function dryVerdict(p: PlannedItem, manifest: Manifest | null, existing: 'refuse' | 'skip' | 'overwrite'): { action: 'process' | 'skip' | 'fail'; reason: string | null } {
  if (p.shadowedBy) return { action: 'fail', reason: `same output as ${p.shadowedBy.path}` };
  if (p.output && existing !== 'overwrite' && !manifest?.records(p.output) && fs.existsSync(p.output)) {
    return existing === 'skip' ? { action: 'skip', reason: 'output exists' } : { action: 'fail', reason: 'output exists; use --overwrite or --skip-existing' };
  }
  return { action: 'process', reason: null };
}
