/**
 * Remove and record: the one service below the doors. Given a request, a payer and an input, it
 * runs the pipeline, then charges and records the run in ONE transaction (store.ledger.recordRun: the
 * charge, the run, the stored result, and the door's own writes in `within`, the transactional
 * outbox of a job's final state and its callback), and answers the result with what was charged.
 *
 * The doors only translate: the sync route (server/v1/routes-remove.ts) adds its deadline and pool
 * slot, the job runner (queue/runner.ts) its claim, the CLI its output file. Billing rules are
 * src/billing.ts's.
 */
import { resultFieldsOf } from '../result-fields.js';
import { assertFunded, chargeFor, needsPixelsToPrice, upfrontPrice, type Payer } from '../billing.js';
import type { Pipeline, RemoveRequest, RemoveResult } from '../pipeline/types.js';
import type { Channel, RecordRunOptions, RunCharge, RunRecord } from '../store/db.js';
import type { Queryable } from '../store/db.js';
import { epochNow, inSpan, NO_TRACING, stageSpans, type TraceSpan, type Tracing } from '../telemetry/tracing.js';

/** The parts of the store the service writes and reads. */
export interface RecordingStore {
  readonly ledger: {
    recordRun(run: RunRecord, options?: RecordRunOptions): Promise<RunCharge>;
    balance(accountId: string): Promise<number>;
  };
}

/**
 * What a door's input step found, once the bytes are here: the image, a background picture
 * (`bg_image_url` fetched, `bg_image_file` uploaded) and what the door decides only from the image
 * (remove.bg's `size=auto`). The service sets them on its own copy of the request: no door writes
 * onto a request from a callback.
 */
export interface Intake {
  image: Buffer;
  background?: Buffer;
  request?: Partial<RemoveRequest>;
}

export interface Removal {
  /** The run's id (a job's id; the stored result's id). */
  id: string;
  request: RemoveRequest;
  payer: Payer;
  /** The image bytes, or how to get them (an image_url fetched under the door's limits), alone or as an Intake. */
  input: Buffer | (() => Promise<Buffer | Intake>);
  channel: Channel;
  /** The input for the operator: a file path, "upload", "url example.com". */
  description: string;
  /**
   * Keep the result in the store (the server's results; `name` per attempt for a job, see
   * RunRecord). Absent: the door keeps the bytes itself (the CLI writes a file).
   */
  storeResult?: { name?: string };
  /**
   * Refuse before any work when the balance is known to fall short (billing.ts). Default true;
   * the job runner passes false: the job was checked at submission, and its charge's transaction
   * decides (the failure then says the result was ready).
   */
  checkFundsFirst?: boolean;
  signal?: AbortSignal;
  /** Called once the model has run (the CLI lets the model go after the last one). */
  afterModel?: () => void;
  /** Runs the pipeline call where the door wants it (the server's pool slot). Default: at once. */
  slot?: <T>(work: () => Promise<T>) => Promise<T>;
  /** Wraps the commit (the sync deadline, which refuses once it has passed). Default: at once. */
  commit?: <T>(step: () => Promise<T>) => Promise<T>;
  /** Before the transaction, with the result: stage what `within` commits (the CLI's output file). */
  beforeRecord?: (result: RemoveResult) => Promise<void>;
  /** Writes that commit or roll back with the charge (a job's done state, an idempotency seal). */
  within?: (tx: Queryable, charged: RunCharge, result: RemoveResult) => Promise<void>;
}

export interface Removed {
  result: RemoveResult;
  charged: RunCharge;
}

export class RemovalService {
  constructor(private readonly deps: {
    pipeline: Pipeline;
    store: RecordingStore;
    /** Told each committed charge (the server's credits counter); never for a run that failed. */
    onCharged?: (channel: Channel, charged: RunCharge) => void;
    /** The server's traces (absent: none, as for the CLI). */
    tracing?: Tracing;
    /** The model call traces itself (an upstream's client span, which the model server joins): no inference span from the timings. */
    inferenceTracedByCaller?: boolean;
  }) {
    this.tracing = deps.tracing ?? NO_TRACING;
  }

  private readonly tracing: Tracing;

  /**
   * The pipeline's run, traced: the wait for a slot of the door's (`slot`), then the run in a span
   * of its own, active while it runs (an upstream's client span is its child), with its stages'
   * spans made from the timings it returns.
   */
  private async runPipeline(removal: Removal, request: RemoveRequest, parent: TraceSpan | undefined, run: () => Promise<RemoveResult>): Promise<RemoveResult> {
    const { tracing } = this;
    const traced = () => inSpan(tracing, 'cutout.pipeline', { parent, attributes: { 'cutout.quality': request.quality ?? 'best', 'cutout.size': request.size } }, async (span) => {
      const startMs = epochNow();
      const result = await run();
      span.setAttributes({ 'cutout.size.resolved': result.resolvedSize, 'cutout.format': result.format, 'cutout.width': result.width, 'cutout.height': result.height });
      stageSpans(tracing, span, startMs, result.timings, { inference: !this.deps.inferenceTracedByCaller });
      return result;
    });
    if (!removal.slot) return traced();
    const wait = tracing.start('cutout.wait_for_worker', { parent });
    try {
      return await removal.slot(() => {
        wait.end();
        return traced();
      });
    } finally {
      wait.end(); // refused or aborted while waiting
    }
  }

  /** Runs one removal to its recorded end; throws a CutoutError (nothing charged) otherwise. */
  async removeAndRecord(removal: Removal): Promise<Removed> {
    const { pipeline, store } = this.deps;
    const { payer, signal } = removal;
    const checkFunds = removal.checkFundsFirst !== false;
    const balanceOf = (accountId: string) => store.ledger.balance(accountId);
    if (checkFunds) await assertFunded(payer, upfrontPrice(removal.request.size), balanceOf);
    const got = typeof removal.input === 'function' ? await removal.input() : removal.input;
    if (signal?.aborted) throw signal.reason;
    const intake: Intake = Buffer.isBuffer(got) ? { image: got } : got;
    const bytes = intake.image;
    // What the input step learnt, on this run's own request (the door's stays as it was asked).
    const request: RemoveRequest = intake.request || intake.background
      ? { ...removal.request, ...intake.request, ...(intake.background ? { bgImageData: intake.background } : {}) }
      : removal.request;
    if (checkFunds && needsPixelsToPrice(payer, request.size)) {
      // `auto` is full up to 4 MP: read the header to know whether it will cost a credit.
      const probe = await pipeline.probeImage(bytes);
      await assertFunded(payer, upfrontPrice(request.size, probe.width * probe.height), balanceOf);
    }
    const parent = this.tracing.active() ?? undefined; // the request's span, or the job's
    const result = await this.runPipeline(removal, request, parent, () => pipeline.removeBackground(bytes, request, { signal, afterModel: removal.afterModel }));
    if (signal?.aborted) throw signal.reason;
    const record: RunRecord = {
      id: removal.id, accountId: payer.accountId, keyId: payer.keyId, channel: removal.channel, input: removal.description,
      size: result.resolvedSize, credits: chargeFor(payer, result.resolvedSize), ms: result.ms,
      result: removal.storeResult
        ? { data: result.data, ext: result.format, name: removal.storeResult.name, contentType: result.contentType, width: result.width, height: result.height, fields: resultFieldsOf(result) }
        : undefined,
    };
    const commit = async () => {
      if (removal.beforeRecord) await removal.beforeRecord(result);
      const within = removal.within;
      // The results store: the bytes written, then the charge, the run and the result's row in one transaction.
      const charged = await inSpan(this.tracing, 'cutout.store', { parent, attributes: { 'cutout.channel': removal.channel, 'cutout.result.stored': Boolean(record.result) } }, async (span) => {
        const outcome = await store.ledger.recordRun(record, within ? { within: (tx, c) => within(tx, c, result) } : {});
        span.setAttributes({ 'cutout.credits_charged': outcome.creditsCharged });
        return outcome;
      });
      this.deps.onCharged?.(removal.channel, charged);
      return { result, charged };
    };
    return removal.commit ? removal.commit(commit) : commit();
  }
}
