/**
 * The job workers: take queued jobs from the store, run them in slots of the WorkPool shared
 * with the sync route (as `job` tasks, see the fair policy in src/queue/pool.ts), and commit the
 * outcome.
 *
 * - A job is claimed only once a slot is held, so `processing` in the store means "running".
 *   At most one claim attempt waits for a slot at a time; a finished job makes room for the next.
 * - A claim carries a lease (renewed while the job runs) and a token (the attempt number). On
 *   start, jobs a crash left `processing` go back to `queued` (after `maxAttempts` claims they
 *   fail instead: a job that keeps killing the server is not retried forever).
 * - Done: the result file is written, then the charge, the run, the stored result, the job's
 *   `done` state and its callback delivery commit in ONE transaction (store.ledger.recordRun with the
 *   job id and channel `job`). Failed: the `failed` state, its error and the callback commit
 *   together; nothing is charged. A lost claim commits nothing.
 * - Stop: no new claims; running jobs get `graceMs` to finish; those still running then go back
 *   to `queued` (their late end commits nothing) and run again at the next start.
 */
import { resultFieldsOf } from '../result-fields.js';
import type { CutoutConfig } from '../config.js';
import { CutoutError, toCutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { fetchImageUrl } from '../net/fetch-url.js';
import type { RemoveRequest } from '../pipeline/types.js';
import type { RemovalService } from '../service/removal.js';
import type { WorkPool } from './pool.js';
import type { JobError, JobRow } from '../store/db.js';
import type { JobStore as StoreJobs } from '../store/jobs.js';

/**
 * What the job workers need of the store (issue 46: a narrow interface, as RecordingStore is the
 * service's): the queue's claims and states, the inputs, and the lease a running job keeps.
 */
export type JobStore = {
  readonly jobs: Pick<StoreJobs,
    | 'claimNext' | 'renewLease' | 'markDoneIn' | 'fail' | 'requeue' | 'requeueAfterOutage'
    | 'reclaimAbandoned' | 'adoptAbandoned' | 'readInput' | 'removeInput' | 'removeOrphanInputs' | 'onQueued'>;
};
import { callbackBody } from './callbacks.js';
import { queueRetryAfterSeconds } from './backoff.js';
import { keepLease } from './lease.js';
import { OutagePause } from './outage.js';
import { inSpan, NO_TRACING, type Tracing } from '../telemetry/tracing.js';

export interface JobRunnerOptions {
  store: JobStore;
  pool: WorkPool;
  /** Runs, charges and records each job (the service the sync route calls too). */
  removals: RemovalService;
  config: Readonly<CutoutConfig>;
  /** The download URL of a result. */
  resultUrl: (id: string) => string;
  /** Called after a job reached done or failed (to deliver its callback). */
  onFinished?: (job: JobRow) => void;
  /** Lease of a claim, renewed every third of it while the job runs. */
  leaseMs?: number;
  /** Claims after which an interrupted job fails instead of going back to the queue. */
  maxAttempts?: number;
  /** How often expired leases are swept and the store looked at for jobs queued by others. */
  sweepMs?: number;
  log?: (line: string) => void;
  /** The server's traces: each job's run joins the trace of the request that created it. */
  tracing?: Tracing;
}

class ClaimLost extends Error {}

interface RunningJob {
  attempt: number;
  controller: AbortController;
}

export class JobRunner {
  private readonly store: JobStore;
  private readonly pool: WorkPool;
  private readonly leaseMs: number;
  private readonly maxAttempts: number;
  private readonly sweepMs: number;
  private readonly log: (line: string) => void;
  /** Job tasks handed to the pool (waiting for a slot or running). */
  private active = 0;
  /** A task waiting for a slot that has not claimed yet: at most one. */
  private probing = false;
  /** The store may hold queued jobs. */
  private more = true;
  private wakeups = 0;
  private stopping = false;
  private sweepTimer: NodeJS.Timeout | null = null;
  private readonly running = new Map<string, RunningJob>();
  private readonly tasks = new Set<Promise<void>>();
  /** Requeued by a stop while still running: their late end is ignored. */
  private readonly abandoned = new Set<string>();
  /** Recent mean time of a job, for Retry-After. */
  private meanMs = 3000;
  /** No claims during an inference outage (gpu_unavailable from the model call). */
  private readonly outage = new OutagePause(() => this.notify());
  private readonly tracing: Tracing;

  constructor(private readonly opts: JobRunnerOptions) {
    this.store = opts.store;
    this.pool = opts.pool;
    this.leaseMs = opts.leaseMs ?? LIMITS.jobLeaseMs;
    this.maxAttempts = opts.maxAttempts ?? LIMITS.jobMaxAttempts;
    // Often enough that a dead server's jobs move soon after its lease runs out.
    this.sweepMs = opts.sweepMs ?? Math.min(5_000, Math.max(250, Math.floor(this.leaseMs / 2)));
    this.log = opts.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.tracing = opts.tracing ?? NO_TRACING;
  }

  /** Recovers what a previous process left, then starts taking jobs. */
  async start(): Promise<void> {
    const requeued = await this.reclaim();
    if (requeued > 0) this.log(`cutout serve: ${requeued} job(s) interrupted by the last stop went back to the queue`);
    await this.store.jobs.removeOrphanInputs();
    // Jobs queued on another server of the fleet wake this one at once; the sweep is the fallback.
    await this.store.jobs.onQueued(() => this.notify());
    this.sweepTimer = setInterval(() => void this.sweep(), this.sweepMs);
    this.sweepTimer.unref();
    this.notify();
  }

  /** True once stop() was called: submissions are refused with 503. */
  get isStopping(): boolean {
    return this.stopping;
  }

  /** Seconds to tell a client refused by a full queue. */
  retryAfterSeconds(queued: number): number {
    return queueRetryAfterSeconds(queued, this.pool.size, this.meanMs);
  }

  /** New jobs were queued: look for them. */
  notify(): void {
    this.wakeups++;
    this.more = true;
    this.pump();
  }

  private pump(): void {
    if (this.stopping || !this.more || this.probing || this.active >= this.pool.size || this.pool.draining) return;
    if (this.outage.paused) return; // the pause's end wakes the queue
    this.probing = true;
    this.active++;
    const wake = this.wakeups;
    let claimed: JobRow | null = null;
    let probeEnded = false;
    const endProbe = () => {
      if (probeEnded) return;
      probeEnded = true;
      this.probing = false;
    };
    const task = this.pool
      .run(async () => {
        try {
          if (this.stopping) return;
          claimed = await this.store.jobs.claimNext(this.leaseMs);
          if (!claimed && wake === this.wakeups) this.more = false;
        } finally {
          endProbe();
        }
        if (claimed) {
          this.pump(); // the next claim may wait for the next free slot meanwhile
          await this.execute(claimed);
        }
      }, { kind: 'job' })
      .catch((err: unknown) => {
        if (!this.stopping) this.log(`cutout serve: job worker: ${(err as Error)?.stack ?? String(err)}`);
      })
      .finally(() => {
        endProbe();
        this.active--;
        this.tasks.delete(task);
        this.pump();
      });
    this.tasks.add(task);
  }

  /**
   * Takes back the jobs of servers that are gone (lease run out, or known dead): they go back to
   * the queue with their attempt counted; those interrupted `maxAttempts` times fail instead.
   */
  private async reclaim(): Promise<number> {
    const { requeued, exhausted } = await this.store.jobs.reclaimAbandoned(this.maxAttempts, [...this.running.keys()]);
    for (const job of exhausted) {
      if (!(await this.store.jobs.adoptAbandoned(job, this.leaseMs))) continue; // another server took it first
      const error = new CutoutError('processing_failed', `The job was interrupted ${job.attempts} times while it ran and is not tried again. Nothing was charged.`);
      if (await this.fail(job, error)) await this.finished(job);
    }
    return requeued;
  }

  private async sweep(): Promise<void> {
    if (this.stopping) return;
    try {
      const moved = await this.reclaim();
      if (moved > 0) this.log(`cutout serve: ${moved} job(s) whose lease expired went back to the queue`);
      this.notify();
    } catch (err) {
      if (!this.stopping) this.log(`cutout serve: job sweep: ${(err as Error).message}`);
    }
  }

  private async execute(job: JobRow): Promise<void> {
    const controller = new AbortController();
    this.running.set(job.id, { attempt: job.attempts, controller });
    // Renewed every third of the lease, so two renewals may be slow or lost before it runs out.
    const stopRenewing = keepLease(this.store, { id: job.id, attempt: job.attempts }, this.leaseMs, () => {
      if (controller.signal.aborted) return;
      this.abandoned.add(job.id);
      controller.abort(new CutoutError('processing_failed', 'The job\'s lease was lost to another server.'));
      this.log(`cutout serve: a job was stopped: its lease ran out and another server took it over`);
    });
    const started = performance.now();
    let final = false;
    try {
      final = await this.traced(job, () => this.process(job, controller.signal));
    } finally {
      stopRenewing();
      this.running.delete(job.id);
      this.abandoned.delete(job.id);
    }
    if (final) {
      this.outage.end();
      this.meanMs = this.meanMs * 0.8 + (performance.now() - started) * 0.2;
      await this.finished(job);
    }
  }

  /**
   * A claimed job's run in a span whose parent is the request that created the job (its stored
   * traceparent; a new trace without one), after a span for its time in the queue: from its
   * creation to this claim, by the store's clock. No job id in either: it is its result's capability URL.
   */
  private traced(job: JobRow, run: () => Promise<boolean>): Promise<boolean> {
    const { tracing } = this;
    if (!tracing.enabled) return run();
    const parent = job.traceparent ?? null;
    const attributes = { 'cutout.job.attempt': job.attempts, 'cutout.quality': job.options.quality ?? 'best', 'cutout.job.source': job.sourceKind, 'cutout.key_id': job.keyId ?? undefined };
    tracing.start('cutout.queue_wait', { parent, startMs: job.createdAt, attributes: { 'cutout.job.attempt': job.attempts } }).end();
    return inSpan(tracing, 'cutout.job', { parent, kind: 'consumer', attributes }, async (span) => {
      const final = await run();
      span.setAttributes({ 'cutout.job.committed': final });
      return final;
    });
  }

  private async finished(job: JobRow): Promise<void> {
    await this.store.jobs.removeInput(job.id);
    this.opts.onFinished?.(job);
  }

  /** The job's image: its stored upload, or its image_url fetched (ended by `signal`: a stop or a lost claim). */
  private async input(job: JobRow, signal: AbortSignal): Promise<Buffer> {
    if (job.sourceKind === 'image_url') {
      if (!job.sourceUrl) throw new CutoutError('processing_failed', 'The job has no image_url.');
      return fetchImageUrl(job.sourceUrl, { allowPrivateNetwork: this.opts.config.allowPrivateNetwork, timeoutMs: LIMITS.fetchTimeoutMs, signal });
    }
    const bytes = await this.store.jobs.readInput(job.id);
    if (!bytes) throw new CutoutError('processing_failed', 'The stored input of this job is missing; nothing was charged.');
    return bytes;
  }

  /** Runs one claimed job to its final state. False when the claim was lost (nothing committed). */
  private async process(job: JobRow, signal: AbortSignal): Promise<boolean> {
    const { store } = this;
    const url = this.opts.resultUrl(job.id);
    const request: RemoveRequest = { ...job.options };
    // The job's span (active here): its callback's deliveries join the trace under it.
    const traceparent = this.tracing.active()?.traceparent;
    try {
      await this.opts.removals.removeAndRecord({
        id: job.id,
        // No 4 MP rule here: large images are what jobs are for (the 25 MB / 50 MP limits still hold).
        request,
        payer: { accountId: job.accountId, keyId: job.keyId, billable: job.billable },
        // The background picture (bg_image_url) is fetched beside the image; the service sets both
        // on its own copy of the request (an Intake, as every door's).
        input: async () => {
          const [image, background] = await Promise.all([
            this.input(job, signal),
            job.options.bgImage ? fetchImageUrl(job.options.bgImage, { allowPrivateNetwork: this.opts.config.allowPrivateNetwork, timeoutMs: LIMITS.fetchTimeoutMs, label: 'bg_image_url', signal }) : undefined,
          ]);
          return { image, background };
        },
        channel: 'job',
        description: job.inputDesc,
        // Named per attempt: a run that lost its claim discards only its own copy, never the one
        // of the run that committed.
        storeResult: { name: `${job.id}.${job.attempts}` },
        // Checked at submission; the charge's transaction decides, and its refusal says why below.
        checkFundsFirst: false,
        signal,
        within: async (tx, charged, result) => {
          const done = { creditsCharged: charged.creditsCharged, creditsRemaining: charged.creditsRemaining ?? 0, fields: resultFieldsOf(result) };
          const callback = job.callbackUrl ? { url: job.callbackUrl, body: callbackBody(job, { status: 'done', url, ...done }), traceparent } : null;
          if (!(await store.jobs.markDoneIn(tx, job.id, job.attempts, done, callback))) throw new ClaimLost();
        },
      });
      return true;
    } catch (err) {
      if (err instanceof ClaimLost) return false;
      if (this.abandoned.has(job.id) || (this.stopping && signal.aborted)) return false;
      if (err instanceof CutoutError && err.code === 'gpu_unavailable') {
        await this.putBackAfterOutage(job, err);
        return false;
      }
      if (err instanceof CutoutError && err.code === 'insufficient_credits') {
        return this.fail(job, new CutoutError('insufficient_credits', 'The balance was 0 when the full-size result was ready, so it was not stored; nothing was charged.'));
      }
      return this.fail(job, err);
    }
  }

  /**
   * The model call is unavailable (an upstream inference server down, timing out, or answering
   * 502/503/504): the job goes back to `queued`, uncharged, and no job is claimed for a delay that doubles
   * with each outage in a row. It runs again once the inference is back; an outage never fails it.
   */
  private async putBackAfterOutage(job: JobRow, err: CutoutError): Promise<void> {
    const delayMs = this.outage.begin(); // before the requeue: this server does not claim it back at once
    await this.store.jobs.requeueAfterOutage({ id: job.id, attempt: job.attempts });
    // Never the job's id: it is also its result's capability URL (GET /results/{id} needs no key).
    this.log(`cutout serve: 1 job back in the queue, claims resume in ${delayMs} ms: ${err.message}`);
  }

  /** Commits `failed` with the error (never a charge). False when the claim was lost. */
  private async fail(job: JobRow, err: unknown): Promise<boolean> {
    if (!(err instanceof CutoutError)) {
      this.log(`cutout serve: unexpected error in a job: ${(err as Error)?.stack ?? String(err)}`);
    }
    const e = toCutoutError(err);
    const error: JobError = { code: e.code, message: e.message };
    // Its delivery's spans join the job's trace (the active span: the job's run).
    const callback = job.callbackUrl ? { url: job.callbackUrl, body: callbackBody(job, { status: 'failed', error }), traceparent: this.tracing.active()?.traceparent } : null;
    return this.store.jobs.fail(job.id, job.attempts, error, callback);
  }

  /**
   * Takes no more jobs; waits up to `graceMs` for running ones; puts those still running back in
   * the queue. Queued jobs stay queued. Resolves once the store no longer needs to be written.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    this.outage.cancel();
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    if (this.tasks.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.tasks]),
        new Promise((resolve) => { timer = setTimeout(resolve, graceMs); }),
      ]);
      clearTimeout(timer);
    }
    if (this.running.size === 0) return;
    const claims = [...this.running.entries()].map(([id, r]) => ({ id, attempt: r.attempt }));
    for (const [id, r] of this.running) {
      this.abandoned.add(id);
      r.controller.abort(new CutoutError('processing_failed', 'The server is stopping.'));
    }
    const moved = await this.store.jobs.requeue(claims).catch(() => 0);
    this.log(`cutout serve: ${moved} job(s) still running after ${graceMs} ms went back to the queue`);
  }
}
