/**
 * One input of `cutout remove`: the per-item unit that each driver calls (the list of inputs in
 * remove.ts; the manifest and the watched folder in batch.ts). It checks where the output goes,
 * reads the input, and through the one remove-and-record service runs the pipeline, charges and
 * records the run with the output put in place, and answers the item's report. It never throws: a failure is the report's `error`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { CutoutError, fsReason, toCutoutError } from '../errors.js';
import { formatMB, inputTooLargeMessage, LIMITS } from '../limits.js';
import { commitOutput, discardStaged, isInputItself, stageOutput } from './output-files.js';
import type { InputItem } from './inputs.js';
import type { Format } from '../options.js';
import type { CutoutPipeline, RemoveRequest, RemoveResult } from '../pipeline/index.js';
import { payerOfKey } from '../billing.js';
import { RemovalService } from '../service/removal.js';
import { resultFieldsOf, type ResultFields } from '../result-fields.js';
import type { Store } from '../store/db.js';

export interface ItemReport {
  input: string;
  output: string | null;
  width: number | null;
  height: number | null;
  ms: number;
  credits_charged?: number;
  skipped?: boolean;
  error: { code: string; message: string } | null;
  /** What the result says of itself (size, box, confidence, time): written under RESULT_FIELDS' JSON and manifest keys. */
  fields?: Partial<ResultFields>;
  /** --review-below: its confidence is below the threshold. */
  review?: boolean;
}

/** Who pays for a run: the account of `--key`, or nobody (a local run, recorded but free). */
export interface Payer {
  accountId: string;
  keyId: string;
  test: boolean;
}

/** What every item of one run shares. */
export interface ItemContext {
  pipeline: CutoutPipeline;
  store: Store;
  payer: Payer | null;
  request: RemoveRequest;
  /** What to do when the output exists (and the manifest does not say it is ours to replace). */
  existing: 'refuse' | 'skip' | 'overwrite';
}

/** An input and where its output goes (null: stdout). */
export interface PlannedItem {
  item: InputItem;
  output: string | null;
  /** An earlier input with the same output name: this one is refused. */
  shadowedBy?: InputItem;
  /** This input's own output format, when it is not the run's: an animation written as WebP (inputs.ts animationFormatOf). */
  format?: Format;
}

export interface ItemHooks {
  /** Called once the item needs the model no more (also when it failed or was skipped before it). */
  afterModel?: () => void;
  /** The existing output is this input's own earlier result (the manifest says so): replace it. */
  replaceOutput?: boolean;
  /**
   * Called the moment the output is renamed into place, before the run's record commits (the
   * manifest's line): nothing can come between the output and its line. When the record then
   * fails, the item's report says so, and the driver records that too.
   */
  onOutputInPlace?: (report: ItemReport, sha256: string) => void;
  /** Called just before the output is renamed into place (the manifest's in-flight list). */
  beforeOutputInPlace?: (output: string) => void;
}

export interface ItemOutcome {
  report: ItemReport;
  /** sha256 of the bytes that were processed (null when the input was not read). */
  sha256: string | null;
  /** The failure's case (CutoutError.reason), e.g. `output_exists`: the batch's closing hint counts them. */
  reason?: string;
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

export function sha256Of(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Whether the item may write its output: 'write', 'skip' (--skip-existing), or a refusal thrown. */
function outputDecision(ctx: ItemContext, planned: PlannedItem, hooks: ItemHooks): 'write' | 'skip' {
  const { item, output, shadowedBy } = planned;
  if (shadowedBy) {
    throw new CutoutError('invalid_request', `Output ${output} is also the output of ${shadowedBy.path}; rename one of them, or run them separately`);
  }
  if (output && isInputItself(output, item.path)) {
    throw new CutoutError('invalid_request', `Output ${output} is the input itself; --overwrite replaces outputs, never the photo`);
  }
  if (output && fs.existsSync(output) && ctx.existing !== 'overwrite' && !hooks.replaceOutput) {
    if (ctx.existing === 'skip') return 'skip';
    throw new CutoutError('invalid_request', `Output ${output} exists; use --overwrite or --skip-existing`, { reason: 'output_exists' });
  }
  return 'write';
}

/**
 * Removes, charges and records one input through the service every door calls (service/removal.ts:
 * billing.ts's pre-check and price, one recordRun transaction), with the output put in place
 * inside that transaction: a refused charge writes nothing, and a failed write charges nothing.
 */
async function removeAndWrite(
  ctx: ItemContext, planned: PlannedItem, bytes: Buffer, hooks: ItemHooks,
  inPlace: (result: RemoveResult, credits: number) => void,
): Promise<{ result: RemoveResult; credits: number }> {
  const { output } = planned;
  let staged: string | null = null;
  try {
    const { result, charged } = await new RemovalService({ pipeline: ctx.pipeline, store: ctx.store }).removeAndRecord({
      id: randomUUID(),
      request: planned.format ? { ...ctx.request, format: planned.format } : ctx.request,
      payer: payerOfKey(ctx.payer),
      input: bytes,
      channel: 'cli',
      description: planned.item.path === '-' ? 'stdin' : path.resolve(planned.item.path),
      afterModel: hooks.afterModel,
      beforeRecord: output ? async (r) => { staged = await stageOutput(output, r.data); } : undefined,
      within: output
        ? async (_tx, outcome, r) => {
          hooks.beforeOutputInPlace?.(output);
          await commitOutput(staged!, output);
          inPlace(r, outcome.creditsCharged);
        }
        : undefined,
    });
    // stdout cannot be taken back: the charge commits first, so a refused one sends nothing.
    if (!output) await new Promise<void>((resolve, reject) => process.stdout.write(result.data, (err) => (err ? reject(err) : resolve())));
    return { result, credits: charged.creditsCharged };
  } finally {
    if (staged) await discardStaged(staged);
  }
}

/** Processes one input and answers its report; never throws. */
export async function processItem(ctx: ItemContext, planned: PlannedItem, hooks: ItemHooks = {}): Promise<ItemOutcome> {
  const started = performance.now();
  const report: ItemReport = { input: planned.item.path, output: planned.output, width: null, height: null, ms: 0, error: null };
  let sha256: string | null = null;
  let reason: string | undefined;
  try {
    if (outputDecision(ctx, planned, hooks) === 'skip') {
      report.skipped = true;
      return { report, sha256 };
    }
    const bytes = await readInput(planned.item);
    sha256 = sha256Of(bytes);
    const inPlace = (result: RemoveResult, credits: number) => {
      report.width = result.width;
      report.height = result.height;
      report.fields = resultFieldsOf(result);
      hooks.onOutputInPlace?.({ ...report, ms: Math.round(performance.now() - started), credits_charged: credits }, sha256!);
    };
    const { result, credits } = await removeAndWrite(ctx, planned, bytes, hooks, inPlace);
    report.width = result.width;
    report.height = result.height;
    report.fields = resultFieldsOf(result);
    if (ctx.payer) report.credits_charged = credits;
  } catch (err) {
    const e = toCutoutError(err);
    reason = e.reason;
    report.output = null; // nothing was written
    report.error = { code: e.code, message: describe(e) };
  } finally {
    hooks.afterModel?.(); // an input that failed or was skipped before its model call
    report.ms = Math.round(performance.now() - started);
  }
  return { report, sha256, reason };
}
