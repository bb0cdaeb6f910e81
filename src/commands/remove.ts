/**
 * `cutout [remove] <inputs...>`: local background removal. A thin adapter: it expands inputs,
 * calls the core pipeline with bounded concurrency, writes outputs, records each run in the
 * ledger, and reports progress (ora on a terminal, plain lines when piped, JSON lines with --json).
 * Exit codes: 0 all done, 1 some input failed (the others still done), 2 usage error.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { loadConfig, withRemoveDefaults, type CutoutConfig } from '../config.js';
import { addSettingFlags, flagsGiven } from './setting-flags.js';
import { CutoutError } from '../errors.js';
import { forTestKey, type Format, type ImageOptions } from '../options.js';
import { readBgImage } from '../bg-image.js';
import { checkConfigFlags, imageOptionsFromFlags, registerImageFlags } from './image-flags.js';
import { animationFormatOf, expandInputs, FORMAT_BY_EXTENSION, isGlob, outputPathFor, planOutput, type ExpandedInputs, type InputItem, type OutputPlan } from './inputs.js';
import { addBatchFlags, BatchRun, checkBatchFlags, Interrupt, keepsNewerOutputs, planBatch, printDryRun, startsModelAtOnce, type BatchFlags, type BatchPlan } from './batch.js';
import { excludeMatcher } from './glob-match.js';
import { outputOptions } from './manifest.js';
import type { ItemContext, PlannedItem } from './remove-item.js';
import { RunResources, startInference } from './run-resources.js';
import { UsageError } from './usage-error.js';
import type { Reporter } from './progress.js';

export type { ItemReport } from './remove-item.js';

export interface RemoveFlags extends BatchFlags {
  out?: string;
  size?: string;
  format?: string;
  bgColor?: string;
  crop?: boolean;
  mask?: boolean;
  alpha?: string;
  refine?: boolean;
  decontaminate?: boolean;
  concurrency?: string;
  inferenceWorkers?: string;
  inferenceThreads?: string;
  model?: string;
  skipExisting?: boolean;
  overwrite?: boolean;
  includeOutputs?: boolean;
  reviewBelow?: string;
  json?: boolean;
  key?: string;
  quality?: string;
  precision?: string;
  recursive?: boolean;
  quiet?: boolean;
  progress?: boolean;
  data?: string;
  config?: string;
  store?: string;
}

/** The defaults a new user trips over: the CLI and the API answer different sizes (issue 29). */
export const REMOVE_DEFAULTS_HELP = `
Sizes: cutout remove defaults to --size full (native resolution; free locally, 1 credit with --key).
The HTTP API (cutout serve) defaults to size=preview (longest side at most 800 px, free) when a
request gives no size, as its specification fixes.`;

export function registerRemove(program: Command): void {
  const command = program
    .command('remove', { isDefault: true })
    .description('remove the background of images (files, folders, quoted globs, or - for stdin)')
    .argument('[inputs...]', 'image files, directories, glob patterns, or - for stdin');
  // The setting flags from the settings table (src/settings.ts), in --help's order among remove's
  // own; --size, --format, --bg-color, --crop, --mask, --alpha, --no-refine, --no-decontaminate,
  // --quality, --precision: from the options table (src/options.ts).
  addSettingFlags(command, 'remove', ['out']);
  registerImageFlags(command);
  addSettingFlags(command, 'remove', ['concurrency', 'model', 'recursive'])
    .option('--include-outputs', 'take named files that look like cutout\'s outputs (x.cutout.png, x.mask.png) as inputs too; folders and globs never do');
  addSettingFlags(command, 'remove', ['skipExisting', 'overwrite'])
    .option('--json', 'one JSON object per input on stdout (with each cutout\'s confidence)')
    .option('--review-below <t>', 'flag each cutout whose confidence (0..1) is below T: a "review:" line on stderr, "review": true in its --json line, the count in the summary')
    .option('--key <api_key>', 'charge that key\'s credits by the same rules as the server');
  addSettingFlags(command, 'remove', ['inferenceWorkers', 'inferenceThreads'])
    .option('-q, --quiet', 'no progress output')
    .option('--no-progress', 'no spinner or progress lines');
  addSettingFlags(command, 'remove', ['dataDir', 'configFile', 'store']);
  addBatchFlags(command)
    .addHelpText('after', REMOVE_DEFAULTS_HELP)
    .action(async (inputs: string[], flags: RemoveFlags) => {
      process.exitCode = await runRemove(inputs, flags);
    });
}


/**
 * For each input whose output path (`outputs[i]`, null for stdout) an earlier input (in
 * command-line order) already has, that earlier input. Two inputs with one output name (a.jpg and
 * a.png; d1/a.jpg and d2/a.jpg with --out) must not silently overwrite each other: the later ones
 * are refused.
 */
function earlierWithSameOutput(items: InputItem[], outputs: (string | null)[]): Map<InputItem, InputItem> {
  const owners = new Map<string, InputItem>();
  const shadowed = new Map<InputItem, InputItem>();
  items.forEach((item, i) => {
    if (outputs[i] === null) return;
    const key = path.resolve(outputs[i]!);
    const owner = owners.get(key);
    if (owner) shadowed.set(item, owner);
    else owners.set(key, item);
  });
  return shadowed;
}

function usage(message: string): never {
  throw new UsageError(message);
}

/** `--review-below T`: a number from 0 to 1 (undefined without the flag). */
function reviewThreshold(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const t = Number(value);
  if (value.trim() === '' || !Number.isFinite(t) || t < 0 || t > 1) usage(`--review-below takes a confidence from 0 to 1, such as 0.8, not ${JSON.stringify(value)}`);
  return t;
}

/** Checked on the flags given over the config file's defaults (a config may set `overwrite`). */
function checkFlagCombinations(inputs: string[], flags: RemoveFlags): void {
  if (flags.skipExisting && flags.overwrite) usage('--skip-existing and --overwrite cannot be used together');
  if (flags.out === '-' && flags.json) usage('--out - writes the image to stdout; it cannot be combined with --json');
  reviewThreshold(flags.reviewBelow);
  checkBatchFlags(inputs, flags);
}

/**
 * `--format auto` at the CLI is decided from the options, so that each output's extension is known
 * before its run and matches its bytes: JPEG over an opaque background (a colour or a picture),
 * else PNG (the matte alone too).
 */
function fileFormat(options: ImageOptions, mask: boolean): Format | 'zip' {
  if (options.format !== 'auto') return options.format;
  if (mask) return 'png';
  const opaqueColor = options.bgColor !== null && (options.bgColor.a === undefined || options.bgColor.a === 255);
  return opaqueColor || options.bgImage ? 'jpg' : 'png';
}

/** `--bg-image`, read once for every input; a flag that names nothing readable is a usage error. */
async function readBackground(options: ImageOptions): Promise<Buffer | undefined> {
  if (!options.bgImage) return undefined;
  try {
    return await readBgImage(options.bgImage, '--bg-image');
  } catch (err) {
    return usage(err instanceof CutoutError ? err.message : String(err));
  }
}

/** The configuration and the image options of a run, from the flags and the config file. */
interface RemoveSettings {
  /** The flags given over the config file's output defaults (format, bgColor, out, ...). */
  flags: RemoveFlags;
  config: CutoutConfig;
  options: ImageOptions;
  edges: { alpha: 'soft' | 'hard'; refine: boolean; decontaminate: boolean };
}

async function readSettings(givenFlags: RemoveFlags): Promise<RemoveSettings> {
  let flags = givenFlags;
  let config;
  let options;
  try {
    // Checked here first so that the message names the flag, not the config key.
    checkConfigFlags(flags as Record<string, unknown>);
    // The setting flags of the settings table, and the two image flags whose default is a setting.
    config = await loadConfig({ ...flagsGiven(null, flags as Record<string, unknown>, 'remove'), quality: flags.quality, precision: flags.precision });
    // The config file's output defaults (format, bgColor, out, ...) under the flags given.
    flags = withRemoveDefaults(givenFlags, config.remove);
    const fromOut = flags.out && flags.out !== '-' ? FORMAT_BY_EXTENSION[path.extname(flags.out).toLowerCase()] : undefined;
    const asked = imageOptionsFromFlags(flags as Record<string, unknown>, { quality: config.quality, precision: config.precision, format: fromOut });
    options = { ...asked, format: fileFormat(asked, Boolean(flags.mask)) };
    if (options.format === 'zip' && flags.mask) usage('--format zip already holds the matte (alpha.png); it cannot be combined with --mask');
  } catch (err) {
    if (err instanceof CutoutError) usage(err.message);
    throw err;
  }
  // The edge settings are part of `options` now (the options table); kept apart for the per-item request.
  const edges = { alpha: options.alpha ?? 'soft', refine: options.refine ?? true, decontaminate: options.decontaminate ?? true };
  return { flags, config, options, edges };
}

/** What a run works on: the inputs found, each with its output, and the arguments that failed. */
interface RemovePlan {
  planned: PlannedItem[];
  unmatched: string[];
  unreadable: ExpandedInputs['unreadable'];
  /** Named files that look like cutout's outputs, left out (no --include-outputs). */
  ownOutputs: string[];
  outputPlan: OutputPlan;
}

/**
 * With --watch a folder or glob that matches nothing yet is no failure: it is watched. A path
 * that names nothing at all still is.
 */
function waitedFor(arg: string): boolean {
  return fs.existsSync(arg) || isGlob(arg);
}

async function planItems(inputs: string[], flags: RemoveFlags, options: ImageOptions): Promise<RemovePlan> {
  const outputDir = flags.out && flags.out !== '-' ? flags.out : null;
  const expanded = await expandInputs(inputs, { recursive: Boolean(flags.recursive), outputDir, includeOutputs: Boolean(flags.includeOutputs) });
  const { unreadable, ownOutputs } = expanded;
  const isExcluded = excludeMatcher(flags.exclude ?? []);
  const items = expanded.items.filter((item) => item.path === '-' || !isExcluded(item.path));
  const unmatched = flags.watch ? expanded.unmatched.filter((arg) => !waitedFor(arg)) : expanded.unmatched;
  const excluded = expanded.items.length - items.length;
  if (!items.length && !unreadable.length && !flags.watch) {
    if (ownOutputs.length && !unmatched.length) usage(`nothing to do: ${ownOutputsNote(ownOutputs)}`);
    usage(`nothing matched: ${unmatched.join(', ') || inputs.join(', ')}${excluded ? ` (${excluded} left out by --exclude)` : ''}`);
  }
  const outputPlan = planOutput(flags.out, items.length);
  if (flags.watch && outputPlan.kind === 'file') usage('--watch writes an output per image: give --out a directory');
  if (outputPlan.kind === 'stdout' && items.length !== 1) usage('--out - needs exactly one input');
  if (outputPlan.kind === 'file' && flags.format) {
    const extFormat = FORMAT_BY_EXTENSION[path.extname(outputPlan.path!).toLowerCase()];
    if (extFormat !== options.format) usage(`--format ${options.format} does not match the extension of --out ${outputPlan.path}`);
  }
  // An animation's output is animated WebP when no format was named: its name says so.
  const formats = outputPlan.kind === 'file' ? items.map(() => null) : await Promise.all(items.map((item) => animationFormatOf(item.path, options)));
  const outputs = items.map((item, i) => outputPathFor(item, outputPlan, formats[i] ?? fileFormat(options, Boolean(flags.mask)), outputSuffix(flags)));
  const shadowedBy = earlierWithSameOutput(items, outputs);
  const planned = items.map((item, i) => ({ item, output: outputs[i], shadowedBy: shadowedBy.get(item), ...(formats[i] ? { format: formats[i] } : {}) }));
  return { planned, unmatched, unreadable, ownOutputs, outputPlan };
}

/** The one line about named inputs left out as cutout's own outputs. */
function ownOutputsNote(files: string[]): string {
  const named = files.length === 1 ? `${files[0]} is` : `${files.length} files (${files.slice(0, 2).join(', ')}${files.length > 2 ? ', ...' : ''}) are`;
  return `${named} named like cutout's own outputs (*.cutout.*, *.mask.*), left out so that a rerun never cuts out a cutout; --include-outputs takes them`;
}

const outputSuffix = (flags: RemoveFlags) => (flags.mask ? '.mask' : '.cutout');

export async function runRemove(inputs: string[], givenFlags: RemoveFlags): Promise<number> {
  if (!inputs.length) usage('no input given; try: cutout photo.jpg (or cutout --help)');
  const settings = await readSettings(givenFlags);
  const { flags, config, options } = settings;
  checkFlagCombinations(inputs, flags);
  // The model's worker thread is running by now when cli.ts guessed a cutout (names.ts
  // startsModelEarly); started here too for arguments that guess missed, once the flags and the
  // configuration are valid (a usage error starts nothing native), unless a rerun from a manifest
  // may need no model at all. Its start and onnxruntime's loading overlap sharp's and the store's.
  const started = startsModelAtOnce(flags) ? startInference() : null;
  started?.catch(() => undefined);
  const plan = await planItems(inputs, flags, options);
  const resources = new RunResources(config, started);
  try {
    // The payer comes first: a test key makes previews, which the manifest compares.
    const payer = flags.key ? await resources.authenticate(flags.key) : null;
    const bgImageData = await readBackground(options);
    const request = { ...forTestKey(options, payer?.test ?? false), ...settings.edges, mask: Boolean(flags.mask), bgImageData };
    const outputOptionsNow = outputOptions(config.model, request);
    const existing = flags.overwrite ? 'overwrite' : flags.skipExisting ? 'skip' : 'refuse';
    const batch = await planBatch(plan.planned, flags, outputOptionsNow, existing);
    const unusable = [...plan.unmatched, ...plan.unreadable.map((u) => u.path)];
    if (flags.dryRun) return printDryRun(batch, unusable, { json: Boolean(flags.json), existing });
    // The session is created in the worker thread while this thread loads sharp and the store,
    // opens the store and reads and decodes the first image (cold start, docs/internals.md). A
    // failure here is left to the first image's run, which reports it.
    if (batch.todo.length) (await resources.model()).loadModel({ quality: options.quality, precision: options.precision }).catch(() => undefined);
    const context = lazily(async (): Promise<ItemContext> => ({ pipeline: await resources.model(), store: await resources.openStore(), payer, request, existing }));
    if (batch.todo.length) context().catch(() => undefined); // the store opens beside the model's loading
    const { createReporter } = await import('./progress.js');
    const reporter = createReporter({ total: plan.planned.length + unusable.length, json: Boolean(flags.json), quiet: Boolean(flags.quiet) || flags.progress === false });
    resources.attachReporter(reporter);
    const interrupt = new Interrupt().install();
    try {
      const run = new BatchRun({
        context, reporter, manifest: batch.manifest, options: outputOptionsNow, concurrency: config.concurrency, interrupt,
        // Once every input is past its model call, the worker thread and its sessions are let go while the last images
        // are still matted and encoded: freeing the session's memory then overlaps that work (cold start, docs/internals.md).
        releaseModel: flags.watch ? undefined : () => resources.releaseModel(),
        force: Boolean(flags.force),
        reviewBelow: reviewThreshold(flags.reviewBelow),
        keepsNewerOutputs: keepsNewerOutputs(flags, existing),
      });
      return await driveBatch(run, {
        inputs, flags, plan, batch, reporter, format: fileFormat(options, Boolean(flags.mask)), animationFormat: (file) => animationFormatOf(file, options),
      });
    } finally {
      interrupt.uninstall();
      batch.manifest?.close();
    }
  } finally {
    await resources.close();
  }
}

interface DriveContext {
  inputs: string[];
  flags: RemoveFlags;
  plan: RemovePlan;
  batch: BatchPlan;
  reporter: Reporter;
  format: Format | 'zip';
  /** A watched file's own format when it is an animation (inputs.ts animationFormatOf). */
  animationFormat: (file: string) => Promise<Format | null>;
}

/** The list, then with --watch the watched folders; the exit code. */
async function driveBatch(run: BatchRun, d: DriveContext): Promise<number> {
  const { flags, plan, batch, reporter } = d;
  // --no-progress drops the progress lines; the batch's own lines (and the summary) only -q.
  const quiet = Boolean(flags.quiet);
  if (plan.ownOutputs.length && !quiet) process.stderr.write(`cutout: ${ownOutputsNote(plan.ownOutputs)}\n`);
  run.reportOwnOutputs(plan.ownOutputs);
  for (const u of plan.unmatched) run.failed({ input: u, output: null, width: null, height: null, ms: 0, error: { code: 'invalid_request', message: 'nothing matched' } });
  for (const u of plan.unreadable) run.failed({ input: u.path, output: null, width: null, height: null, ms: 0, error: { code: 'invalid_request', message: u.message } });
  run.reportUnchanged(batch.unchanged, quiet);
  run.adopt(batch.adopted, quiet);
  run.reportMadeBefore(batch.madeBefore, quiet);
  if (!batch.todo.length && batch.unchanged.length && !batch.adopted.length && !flags.watch && !quiet) {
    process.stderr.write('cutout: nothing to do: every input is unchanged since the manifest; the model was not loaded\n');
  }
  await run.drive(batch.todo);
  if (flags.watch && !run.interrupted) {
    const { watchInputs } = await import('./watch.js');
    await watchInputs(run, { inputs: d.inputs, recursive: Boolean(flags.recursive), exclude: flags.exclude ?? [], outputPlan: plan.outputPlan, suffix: outputSuffix(flags), format: d.format, animationFormat: d.animationFormat, quiet });
  }
  const batchRun = isBatch(d.inputs, flags);
  const { code, summary } = run.finish({ json: Boolean(flags.json) && batchRun, watching: Boolean(flags.watch), hint: continueHint(flags) });
  await reporter.finish(batchRun && !quiet ? summary : undefined, run.tally.failed);
  return code;
}

/**
 * Whether a run is a batch, which ends with a summary line (and `{"summary"}` with --json): more
 * than one input argument (a shell's `*.jpg`), a folder or a glob, or a batch flag. One photo
 * named alone keeps its one line.
 */
function isBatch(inputs: string[], flags: RemoveFlags): boolean {
  if (flags.manifest || flags.watch || flags.exclude?.length || inputs.length > 1) return true;
  const [only] = inputs;
  return only !== '-' && (isDirectory(only) || (!fs.existsSync(only) && isGlob(only)));
}

function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** What the interrupt line tells a person to run next. */
function continueHint(flags: RemoveFlags): string {
  return flags.manifest || flags.skipExisting ? 'run the same command again to continue' : 'run it again with --skip-existing (or with --manifest FILE) to continue';
}

/** `make()`, called once, on first use. */
function lazily<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | null = null;
  return () => (made ??= make());
}
