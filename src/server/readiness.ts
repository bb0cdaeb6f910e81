/**
 * Readiness (`GET /readyz`, cli-contract "cutout serve"): whether this server can take work now.
 * 200 when its store answered a trivial query within LIMITS.readyStoreTimeoutMs, with `--results
 * s3://...` the object store answered a HEAD of its probe object within the same time, and, with
 * `--upstream`, the upstream is ready; else 503 with a JSON body naming what is not ready. No
 * authentication, like health. Health itself stays 200 while the process is up (api-spec 4.8):
 * load balancers and Kubernetes take servers out of rotation by this probe, not by health.
 *
 * The store's probe is shared: while one is waiting, every caller (the probe of each load
 * balancer, the metrics scrape) waits on the same one, so a frozen database is not sent a new
 * query per probe, and each caller still has its answer within the timeout.
 */
import { LIMITS } from '../limits.js';
import type { Store } from '../store/db.js';
import type { ResultStore } from '../store/results.js';

/** Resolves with `promise`'s value, or rejects with a timeout once `ms` have passed. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export type StoreState = { ready: true } | { ready: false; reason: string };

/**
 * One probe shared by every caller while it waits, bounded by `timeoutMs`. `what` names the thing
 * probed in the reasons ("the store", "the object store s3://bucket/prefix/").
 */
class SharedProbe {
  private probe: { started: number; outcome: Promise<StoreState> } | null = null;
  last: StoreState | null = null;

  constructor(private readonly ping: () => Promise<void>, private readonly what: string, private readonly timeoutMs: number) {}

  async check(): Promise<StoreState> {
    if (!this.probe) {
      const outcome: Promise<StoreState> = this.ping().then(
        () => ({ ready: true }) as const,
        // The store's own words stay in the server (they may name hosts): a fixed reason here.
        () => ({ ready: false, reason: `${this.what} refused the query or could not be reached` }) as const,
      );
      const probe = { started: Date.now(), outcome };
      this.probe = probe;
      void outcome.finally(() => { if (this.probe === probe) this.probe = null; });
    }
    const { started, outcome } = this.probe;
    const left = started + this.timeoutMs - Date.now();
    const slow: StoreState = { ready: false, reason: `${this.what} did not answer within ${this.timeoutMs} ms` };
    const state = left <= 0 ? slow : await withTimeout(outcome, left).catch(() => slow);
    this.last = state;
    return state;
  }
}

export class StoreReadiness {
  private readonly store: SharedProbe;
  /** Where result bytes live, when that is not the store itself (an object store); null otherwise. */
  private readonly results: SharedProbe | null;

  constructor(store: Pick<Store, 'ping'> & { readonly results?: Pick<ResultStore, 'kind' | 'description' | 'ping'> }, timeoutMs: number = LIMITS.readyStoreTimeoutMs) {
    this.store = new SharedProbe(() => store.ping(), 'the store', timeoutMs);
    const results = store.results;
    this.results = results?.kind === 's3'
      ? new SharedProbe(() => results.ping(), `the object store ${results.description}`, timeoutMs)
      : null;
  }

  /** The last answer about the store (metrics read it without waiting). */
  get last(): StoreState | null { return this.store.last; }

  /** Whether the store answers now; never takes longer than the timeout. */
  check(): Promise<StoreState> { return this.store.check(); }

  /** Whether the object store of the results answers now; null when results live in the store itself. */
  checkResults(): Promise<StoreState> | null { return this.results?.check() ?? null; }
}
