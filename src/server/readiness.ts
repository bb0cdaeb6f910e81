/**
 * Readiness (`GET /readyz`, cli-contract "cutout serve"): whether this server can take work now.
 * 200 when its store answered a trivial query within LIMITS.readyStoreTimeoutMs and, with
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

export class StoreReadiness {
  private probe: { started: number; outcome: Promise<StoreState> } | null = null;
  /** The last answer (metrics read it without waiting). */
  last: StoreState | null = null;

  constructor(private readonly store: Pick<Store, 'ping'>, private readonly timeoutMs: number = LIMITS.readyStoreTimeoutMs) {}

  /** Whether the store answers now; never takes longer than the timeout. */
  async check(): Promise<StoreState> {
    if (!this.probe) {
      const outcome: Promise<StoreState> = this.store.ping().then(
        () => ({ ready: true }) as const,
        // The database's own words stay in the server (they may name hosts): a fixed reason here.
        () => ({ ready: false, reason: 'the store refused the query or could not be reached' }) as const,
      );
      const probe = { started: Date.now(), outcome };
      this.probe = probe;
      void outcome.finally(() => { if (this.probe === probe) this.probe = null; });
    }
    const { started, outcome } = this.probe;
    const left = started + this.timeoutMs - Date.now();
    const slow: StoreState = { ready: false, reason: `the store did not answer within ${this.timeoutMs} ms` };
    const state = left <= 0 ? slow : await withTimeout(outcome, left).catch(() => slow);
    this.last = state;
    return state;
  }
}
