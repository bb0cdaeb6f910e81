/**
 * Delivers job callbacks from the stored `callback_deliveries` rows: POST of the stored body with
 * `Content-Type: application/json` and `X-Service-Signature: sha256=<hex HMAC-SHA256 of the raw
 * body>`, through the SSRF-checked `postJson`. One try and `retries` (3) retries on network
 * errors and 5xx, with exponential backoff from `firstDelayMs` (--callback-backoff). Each
 * attempt's outcome is written to the store, so a restart picks pending deliveries up where
 * they were. Delivery is at least once: an attempt cut by a crash is made again. A stop waits for
 * the attempts in flight to end (each within its timeout) and records them, so a graceful stop
 * never hands an attempt still being sent to another server: at most one send per attempt.
 */
import { RESULT_FIELDS, resultJson, type ResultFields, type ResultFieldTable } from '../result-fields.js';
import { LIMITS } from '../limits.js';
import { postJson } from '../net/fetch-url.js';
import type { Delivery, JobError, Store } from '../store/db.js';
import type { DeliveryStore as StoreDeliveries } from '../store/deliveries.js';

/** What the callback deliveries need of the store: their rows and the store's clock. */
export type DeliveryStore = Pick<Store, 'now'> & { readonly deliveries: Pick<StoreDeliveries, 'claimDue' | 'nextAt' | 'recordAttempt' | 'release'> };
import { deliveryDecision, type AttemptOutcome } from './backoff.js';
import { signBody } from './secret.js';
import { NO_TRACING, type Tracing } from '../telemetry/tracing.js';

/** The callback body of api-spec 2.7 for a finished job, with a done job's result fields: the exact text that is signed and sent. */
export function callbackBody(
  job: { id: string },
  outcome: { status: 'done'; url: string; creditsCharged: number; creditsRemaining: number; fields?: Partial<ResultFields> } | { status: 'failed'; error: JobError },
  table: ResultFieldTable = RESULT_FIELDS,
): string {
  if (outcome.status === 'done') {
    return JSON.stringify({
      job_id: job.id, status: 'done', url: outcome.url, credits_charged: outcome.creditsCharged, credits_remaining: outcome.creditsRemaining,
      ...resultJson(outcome.fields, table),
    });
  }
  return JSON.stringify({ job_id: job.id, status: 'failed', error: { code: outcome.error.code, message: outcome.error.message } });
}

export interface CallbackDispatcherOptions {
  store: DeliveryStore;
  secret: string;
  firstDelayMs: number;
  allowPrivateNetwork: boolean;
  retries?: number;
  /** Per attempt: DNS, connect, send and the answer. */
  timeoutMs?: number;
  /** Attempts in flight at once. */
  concurrency?: number;
  log?: (line: string) => void;
  /** Told each attempt's outcome once it is recorded (the server's metrics count them). */
  onAttempt?: (outcome: 'delivered' | 'retry' | 'gave_up') => void;
  /** The server's traces: each attempt is a span in the trace of its job's run, and its POST carries `traceparent`. */
  tracing?: Tracing;
}

/** Longest sleep between two looks at the table, so rows written by another process are seen. */
const MAX_IDLE_MS = 2_000;

export class CallbackDispatcher {
  private readonly inflight = new Map<number, Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private passing: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private readonly retries: number;
  private readonly timeoutMs: number;
  private readonly concurrency: number;
  private readonly log: (line: string) => void;

  constructor(private readonly opts: CallbackDispatcherOptions) {
    this.retries = opts.retries ?? LIMITS.callbackRetries;
    this.timeoutMs = opts.timeoutMs ?? LIMITS.callbackAttemptTimeoutMs;
    this.concurrency = opts.concurrency ?? 8;
    this.log = opts.log ?? ((line) => process.stderr.write(`${line}\n`));
  }

  start(): void {
    this.kick();
  }

  /** Looks for due deliveries now (after a job finished, or when a timer fires). */
  kick(): void {
    if (this.stopped) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.passing = this.pass()
      .catch((err: unknown) => this.log(`cutout serve: callback delivery: ${(err as Error).message}`))
      .finally(() => {
        this.passing = null;
        if (this.again) {
          this.again = false;
          this.kick();
        } else {
          void this.schedule();
        }
      });
  }

  private async pass(): Promise<void> {
    const room = this.concurrency - this.inflight.size;
    if (room <= 0) return;
    // Claimed under a lease: with several servers, each attempt is made by exactly one of them.
    const due = await this.opts.store.deliveries.claimDue(room, LIMITS.callbackLeaseMs);
    if (this.stopped) {
      await this.opts.store.deliveries.release(due.map((d) => d.id));
      return;
    }
    for (const d of due) {
      if (this.inflight.has(d.id)) continue;
      const attempt = this.attempt(d).catch((err: unknown) => {
        if (!this.stopped) this.log(`cutout serve: callback delivery ${d.id}: ${(err as Error).message}`);
      }).finally(() => {
        this.inflight.delete(d.id);
        this.kick();
      });
      this.inflight.set(d.id, attempt);
    }
  }

  /** Sleeps until the next pending delivery is due (at most MAX_IDLE_MS). */
  private async schedule(): Promise<void> {
    if (this.stopped || this.timer) return;
    let delay = MAX_IDLE_MS;
    try {
      const next = await this.opts.store.deliveries.nextAt();
      if (next !== null) delay = Math.min(MAX_IDLE_MS, Math.max(0, next - this.opts.store.now()));
    } catch {
      // the store is closing: the stop will follow
    }
    if (this.stopped || this.timer || this.passing) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.kick();
    }, Math.max(10, delay));
    this.timer.unref();
  }

  /**
   * One POST of a delivery, in a span (a client span in its job's trace): the attempt's number and
   * its answer's status, never the URL (a receiver's query string carries its own secrets), the body
   * or the signature.
   */
  private async send(d: Delivery, attempt: number): Promise<AttemptOutcome> {
    const tracing = this.opts.tracing ?? NO_TRACING;
    const span = tracing.start('cutout.callback', { parent: d.traceparent, kind: 'client', attributes: { 'cutout.callback.attempt': attempt, 'http.request.method': 'POST' } });
    try {
      const { status } = await postJson(
        d.url, d.body,
        { 'X-Service-Signature': signBody(d.body, this.opts.secret), ...span.headers() },
        { allowPrivateNetwork: this.opts.allowPrivateNetwork, timeoutMs: this.timeoutMs },
      );
      span.setAttributes({ 'http.response.status_code': status });
      if (status < 200 || status >= 300) span.fail({ code: String(status) });
      return { status };
    } catch (err) {
      span.fail({ code: 'network_error' });
      return { networkError: (err as Error).message };
    } finally {
      span.end();
    }
  }

  private async attempt(d: Delivery): Promise<void> {
    const attemptsMade = d.attempts + 1;
    const outcome = await this.send(d, attemptsMade);
    const decision = deliveryDecision(attemptsMade, outcome, { retries: this.retries, firstDelayMs: this.opts.firstDelayMs });
    const { store } = this.opts;
    if (decision.state === 'delivered') {
      await store.deliveries.recordAttempt(d.id, { state: 'delivered', attempts: attemptsMade });
    } else if (decision.state === 'retry') {
      await store.deliveries.recordAttempt(d.id, { state: 'retry', attempts: attemptsMade, nextAttemptAt: store.now() + decision.delayMs, lastError: decision.reason });
    } else {
      await store.deliveries.recordAttempt(d.id, { state: 'gave_up', attempts: attemptsMade, lastError: decision.reason });
      this.log(`cutout serve: callback delivery ${d.id} given up: ${decision.reason}`);
    }
    this.opts.onAttempt?.(decision.state);
  }

  /**
   * Stops scheduling attempts and waits for those in flight: each ends within its timeout and its
   * outcome (a failed attempt, for a timeout) is recorded, so none is handed back while its request
   * may still reach the receiver. Pending rows stay in the store for any server to deliver.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const all = Promise.allSettled([this.passing, ...this.inflight.values()]);
    const graceMs = this.timeoutMs + LIMITS.callbackRecordMarginMs;
    await Promise.race([all, new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
    // Only when recording the outcome hangs (the store unreachable): their sends have ended by
    // now, so another server may retry them without waiting for the lease.
    if (this.inflight.size > 0) await this.opts.store.deliveries.release([...this.inflight.keys()]).catch(() => undefined);
  }
}
