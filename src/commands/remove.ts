/**
 * `cutout [remove] <inputs...>`: local background removal. A thin adapter: it expands inputs,
 * calls the core pipeline with bounded concurrency, writes outputs, records each run in the
 * ledger, and reports progress (ora on a terminal, plain lines when piped, JSON lines with --json).
 * Exit codes: 0 all done, 1 some input failed (the others still done), 2 usage error.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Command } from 'commander';
import { loadConfig, withRemoveDefaults } from '../config.js';
import { STORE_FLAG_HELP } from './keys.js';
import { CutoutError, fsReason, toCutoutError } from '../errors.js';
import { formatMB, inputTooLargeMessage, LIMITS } from '../limits.js';
import { CLI_DEFAULTS, forTestKey, parseEnum, parseImageOptions, PRECISIONS, QUALITIES } from '../options.js';
import { expandInputs, FORMAT_BY_EXTENSION, outputPathFor, planOutput, type InputItem } from './inputs.js';
import { commitOutput, discardStaged, isInputItself, removeStagedOnSignals, stageOutput } from './output-files.js';
import { UsageError } from './usage-error.js';
import type { Reporter } from './progress.js';
import type { PreparationEvent } from '../pipeline/weights.js';

export interface RemoveFlags {
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

export interface ItemReport {
  input: string;
  output: string | null;
  width: number | null;
  height: number | null;
  ms: number;
  credits_charged?: number;
  skipped?: boolean;
  error: { code: string; message: string } | null;
}

/** The defaults a new user trips over: the CLI and the API answer different sizes (issue 29). */
export const REMOVE_DEFAULTS_HELP = `
Sizes: cutout remove defaults to --size full (native resolution; free locally, 1 credit with --key).
The HTTP API (cutout serve) defaults to size=preview (longest side at most 800 px, free) when a
request gives no size, as its specification fixes.`;

export function registerRemove(program: Command): void {
  program
    .command('remove', { isDefault: true })
    .description('remove the background of images (files, folders, quoted globs, or - for stdin)')
    .argument('[inputs...]', 'image files, directories, glob patterns, or - for stdin')
    .option('-o, --out <path>', 'output directory, or a file when there is one input; - for stdout')
    .option('--size <size>', 'preview | full | auto (default: full)')
    .option('--format <format>', 'png | webp | jpg (default: png, or from --out FILE)')
    .option('--bg-color <color>', 'transparent or a hex colour such as #ffffff (default: transparent)')
    .option('--crop', 'crop to the subject\'s bounding box')
    .option('--mask', 'write the alpha matte alone (greyscale) instead of the cutout')
    .option('--alpha <mode>', 'soft | hard: hard thresholds the matte at 50 % (stickers, icons) (default: soft)')
    .option('--no-refine', 'plain bilinear matte instead of the guided refinement at full resolution')
    .option('--no-decontaminate', 'keep the original colours at soft edges (no foreground colour estimation)')
    .option('-c, --concurrency <n>', 'images processed at once (default: 2 with two cores or more: one image\'s decode and encode beside the other\'s inference; inferences run one at a time)')
    .option('--model <name|file>', 'a model from `cutout models list`, or an .onnx file with its manifest')
    .option('-r, --recursive', 'descend into sub-directories of directory inputs')
    .option('--skip-existing', 'skip inputs whose output exists')
    .option('--overwrite', 'replace existing outputs')
    .option('--json', 'one JSON object per input on stdout')
    .option('--key <api_key>', 'charge that key\'s credits by the same rules as the server')
    .option('--quality <quality>', 'fast | balanced | best | max: speed against quality, the model\'s input size; max adds a second pass on a small subject\'s box (default: best, or `quality` in the config)')
    .option('--inference-workers <n>', 'inference worker threads, each with its own session (default: 1 up to 8 cores, then one per 8 cores; docs/benchmarks.md)')
    .option('--inference-threads <n>', 'intra-op threads of each session (default: the cores over the workers; env CUTOUT_THREADS)')
    .option('--precision <precision>', 'auto | fp32 | int8: the model\'s number format; auto runs int8 only on a CPU with VNNI and when int8 passed the quality bar (default: auto, or `precision` in the config)')
    .option('-q, --quiet', 'no progress output')
    .option('--no-progress', 'no spinner or progress lines')
    .option('--data <dir>', 'data directory (default: $CUTOUT_HOME or ~/.cutout)')
    .option('--config <file>', 'config file (default: found by cosmiconfig, module name "cutout")')
    .option('--store <url>', STORE_FLAG_HELP)
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

/** One line, no stack: what a person reads on stderr. */
function describe(err: CutoutError): string {
  return err.code === 'processing_failed' && err.cause ? `${err.message} (${String((err.cause as Error).message ?? err.cause).split('\n')[0]})` : err.message;
}

async function readInput(item: InputItem): Promise<Buffer> {
  if (item.path === '-') {
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of process.stdin) {
      total += (chunk as Buffer).length;
      if (total > LIMITS.maxInputBytes) throw new CutoutError('image_too_large', `Input is over ${formatMB(LIMITS.maxInputBytes)}`);
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }
  let stat: fs.Stats;
  try {
    stat = await fs.promises.stat(item.path);
  } catch {
    throw new CutoutError('invalid_request', 'No such file');
  }
  if (!stat.isFile()) throw new CutoutError('invalid_request', 'Not a regular file');
  // Check the size before reading: a 2 GB file must not be read to be refused.
  if (stat.size > LIMITS.maxInputBytes) {
    throw new CutoutError('image_too_large', inputTooLargeMessage(stat.size));
  }
  try {
    return await fs.promises.readFile(item.path);
  } catch (err) {
    throw new CutoutError('invalid_request', `Cannot read the file: ${fsReason(err)}`);
  }
}

export async function runRemove(inputs: string[], givenFlags: RemoveFlags): Promise<number> {
  if (!inputs.length) usage('no input given; try: cutout photo.jpg (or cutout --help)');
  if (givenFlags.skipExisting && givenFlags.overwrite) usage('--skip-existing and --overwrite cannot be used together');
  let flags = givenFlags;

  let config;
  let options;
  try {
    // Checked here first so that the message names the flag, not the config key.
    if (flags.quality !== undefined) parseEnum('quality', QUALITIES, flags.quality, 'cli');
    if (flags.precision !== undefined) parseEnum('precision', PRECISIONS, flags.precision, 'cli');
    config = await loadConfig({ dataDir: flags.data, model: flags.model, concurrency: flags.concurrency, inferenceWorkers: flags.inferenceWorkers, inferenceThreads: flags.inferenceThreads, quality: flags.quality, precision: flags.precision, store: flags.store }, { configFile: flags.config });
    // The config file's output defaults (format, bgColor, out, ...) under the flags given.
    flags = withRemoveDefaults(givenFlags, config.remove);
    if (flags.out === '-' && flags.json) usage('--out - writes the image to stdout; it cannot be combined with --json');
    const fromOut = flags.out && flags.out !== '-' ? FORMAT_BY_EXTENSION[path.extname(flags.out).toLowerCase()] : undefined;
    options = parseImageOptions(
      { size: flags.size, format: flags.format, bg_color: flags.bgColor, crop: flags.crop, quality: config.quality, precision: config.precision },
      'cli',
      { ...CLI_DEFAULTS, format: fromOut ?? CLI_DEFAULTS.format },
    );
    if (flags.alpha !== undefined) parseEnum('alpha', ['soft', 'hard'] as const, flags.alpha, 'cli');
  } catch (err) {
    if (err instanceof CutoutError) usage(err.message);
    throw err;
  }
  // The model's worker thread is running by now (cli.ts starts it when the arguments look like a
  // cutout); started here too, once the flags and the configuration are valid (a usage error
  // starts nothing native), for arguments that guess missed, so that its start and onnxruntime's
  // loading overlap sharp's and the store's.
  const pipelineModule = import('../pipeline/inference-thread.js').then((thread) => {
    thread.startInferenceThread();
    return import('../pipeline/index.js');
  });
  const edges = {
    alpha: (flags.alpha?.trim().toLowerCase() ?? 'soft') as 'soft' | 'hard',
    refine: flags.refine !== false,
    decontaminate: flags.decontaminate !== false,
  };

  const { items, unmatched, unreadable } = await expandInputs(inputs, { recursive: Boolean(flags.recursive) });
  if (!items.length && !unreadable.length) usage(`nothing matched: ${unmatched.join(', ')}`);
  const plan = planOutput(flags.out, items.length);
  if (plan.kind === 'stdout' && items.length !== 1) usage('--out - needs exactly one input');
  if (plan.kind === 'file' && flags.format) {
    const extFormat = FORMAT_BY_EXTENSION[path.extname(plan.path!).toLowerCase()];
    if (extFormat !== options.format) usage(`--format ${options.format} does not match the extension of --out ${plan.path}`);
  }

  // Preparation events that come before the progress display exists are held for it.
  let reporterForPreparation: Reporter | null = null;
  const earlyPreparation: PreparationEvent[] = [];
  const { createPipeline } = await pipelineModule;
  let pipeline: import('../pipeline/index.js').CutoutPipeline;
  try {
    pipeline = createPipeline({
      model: config.model, precision: config.precision, dataDir: config.dataDir,
      inferenceWorkers: config.inferenceWorkers, threads: config.inferenceThreads,
      onPreparation: (event) => (reporterForPreparation ? reporterForPreparation.preparation(event) : earlyPreparation.push(event)),
    });
  } catch (err) {
    usage((err as Error).message);
  }
  // The session is created in the worker thread while this thread loads sharp and the store,
  // opens the store and reads and decodes the first image (cold start, docs/internals.md). A failure here
  // is left to the first image's run, which reports it.
  if (items.length) pipeline.loadModel({ quality: options.quality, precision: options.precision }).catch(() => undefined);

  // Heavy modules load only now: --help and usage errors stay fast.
  const [{ openStore }, { default: pLimit }, { createReporter }] = await Promise.all([
    import('../store/db.js'),
    import('p-limit'),
    import('./progress.js'),
  ]);
  let store;
  try {
    store = await openStore(config.dataDir, { url: config.store });
  } catch (err) {
    await pipeline.close();
    throw err;
  }
  // Closed on every path: an open PostgreSQL pool would keep the CLI alive after an error.
  try {
    let account: { accountId: string; keyId: string; test: boolean } | null = null;
    if (flags.key) {
      account = await store.authenticate(flags.key);
      if (!account) usage('--key: invalid or revoked API key');
    }

    removeStagedOnSignals();
    const reporter = createReporter({
      total: items.length + unmatched.length + unreadable.length,
      json: Boolean(flags.json),
      quiet: Boolean(flags.quiet) || flags.progress === false,
    });
    reporterForPreparation = reporter;
    for (const event of earlyPreparation) reporter.preparation(event);
    let failures = 0;
    // Set at the first failure, not at the end: a reader that closes stdout early ends the run
    // with the exit code so far (cli.ts), which must already say 1.
    const fail = () => {
      failures++;
      process.exitCode = 1;
    };
    for (const u of unmatched) {
      fail();
      reporter.done({ input: u, output: null, width: null, height: null, ms: 0, error: { code: 'invalid_request', message: 'nothing matched' } });
    }
    for (const u of unreadable) {
      fail();
      reporter.done({ input: u.path, output: null, width: null, height: null, ms: 0, error: { code: 'invalid_request', message: u.message } });
    }
    const runOptions = forTestKey(options, account?.test ?? false);
    const suffix = flags.mask ? '.mask' : '.cutout';
    const outputs = items.map((item) => outputPathFor(item, plan, options.format, suffix));
    const shadowedBy = earlierWithSameOutput(items, outputs);

    // Once every input is past its model call, the worker thread and its sessions are let go
    // while the last images are still matted and encoded: freeing the session's memory (about
    // 30 ms at int8) then overlaps that work instead of delaying the exit (cold start, docs/internals.md).
    let needingModel = items.length;
    const doneWithModel = () => {
      if (--needingModel === 0) pipeline.releaseModel().catch(() => undefined);
    };
    const limit = pLimit(config.concurrency);
    await Promise.all(
      items.map((item, index) =>
        limit(async () => {
          const started = performance.now();
          let modelDone = false;
          const afterModel = () => {
            if (modelDone) return;
            modelDone = true;
            doneWithModel();
          };
          const output = outputs[index];
          const report: ItemReport = { input: item.path, output, width: null, height: null, ms: 0, error: null };
          reporter.start(item.path);
          try {
            const owner = shadowedBy.get(item);
            if (owner) {
              throw new CutoutError('invalid_request', `Output ${output} is also the output of ${owner.path}; rename one of them, or run them separately`);
            }
            if (output && isInputItself(output, item.path)) {
              throw new CutoutError('invalid_request', `Output ${output} is the input itself; --overwrite replaces outputs, never the photo`);
            }
            if (output && fs.existsSync(output) && !flags.overwrite) {
              if (flags.skipExisting) {
                report.skipped = true;
                return;
              }
              throw new CutoutError('invalid_request', `Output ${output} exists; use --overwrite or --skip-existing`);
            }
            const bytes = await readInput(item);
            const wantsCharge = account && !account.test;
            if (wantsCharge && runOptions.size === 'full' && (await store.balance(account!.accountId)) <= 0) {
              throw new CutoutError('insufficient_credits');
            }
            const result = await pipeline.removeBackground(bytes, { ...runOptions, ...edges, mask: Boolean(flags.mask) }, { afterModel });
            const credits: 0 | 1 = wantsCharge && result.resolvedSize === 'full' ? 1 : 0;
            const run = {
              id: randomUUID(),
              accountId: account?.accountId ?? null,
              keyId: account?.keyId ?? null,
              channel: 'cli' as const,
              input: item.path === '-' ? 'stdin' : path.resolve(item.path),
              size: result.resolvedSize,
              credits,
              ms: result.ms,
            };
            let charged;
            if (output) {
              // The output is renamed into place inside the charge's transaction: a refused charge
              // writes nothing, and a failed write charges nothing.
              const tmp = await stageOutput(output, result.data);
              try {
                charged = await store.recordRun(run, { within: () => commitOutput(tmp, output) });
              } finally {
                await discardStaged(tmp);
              }
            } else {
              // stdout cannot be taken back: the charge commits first, so a refused one sends nothing.
              charged = await store.recordRun(run);
              await new Promise<void>((resolve, reject) => process.stdout.write(result.data, (err) => (err ? reject(err) : resolve())));
            }
            report.width = result.width;
            report.height = result.height;
            if (account) report.credits_charged = charged.creditsCharged;
          } catch (err) {
            const e = toCutoutError(err);
            fail();
            report.output = null; // nothing was written
            report.error = { code: e.code, message: describe(e) };
          } finally {
            afterModel(); // an input that failed or was skipped before its model call
            report.ms = Math.round(performance.now() - started);
            reporter.done(report);
          }
        }),
      ),
    );
    await reporter.finish();
    return failures ? 1 : 0;
  } finally {
    await store.close();
    await pipeline.close();
  }
}
