/**
 * What every concern of the store (keys, ledger, results, jobs, ...) works with: the database,
 * the clock, and the places bytes and secrets live. Made once per store by db.ts's openStore.
 */
import type { JobInputs, Liveness, SharedSecrets } from './engine.js';
import type { ResultPlacement } from './results-bytes.js';
import type { Db } from './sql.js';

export interface StoreContext {
  db: Db;
  dataDir: string;
  /** Milliseconds since the epoch; injectable so tests can place runs on other days. */
  now: () => number;
  /** Where job-input bytes live (files for SQLite, BYTEA for PostgreSQL). */
  inputs: JobInputs;
  /** Where result bytes live (results-bytes.ts): chosen apart from the engine. */
  results: ResultPlacement;
  /** The secrets every server of the store shares. */
  secrets: SharedSecrets;
  /** Whether the server holding a claim still runs. */
  liveness: Liveness;
  /** This server's identity, the owner of its claims. */
  owner: string;
}

/** `f` with the context given: a concern's method (store.jobs.claimNext) from its module's function. */
export function boundTo<A extends unknown[], R>(ctx: StoreContext, f: (ctx: StoreContext, ...args: A) => R): (...args: A) => R {
  return (...args: A) => f(ctx, ...args);
}
