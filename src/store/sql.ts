/**
 * What the store's modules see of a database engine: statements with `?` placeholders (the
 * PostgreSQL engine numbers them `$1, $2, ...`), transactions, and the few words of SQL where the
 * engines differ. The modules above (ledger, jobs, idempotency) write portable SQL and add
 * `q.dialect.forUpdate` / `q.dialect.skipLocked` where a row lock matters: SQLite's BEGIN
 * IMMEDIATE already serialises every writing transaction, PostgreSQL needs the row lock. The rate
 * limit's one upsert is written per engine (an array against JSON), side by side in rate-limit.ts.
 */
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';

export type SqlParam = string | number | bigint | null | Buffer;
export type Row = Record<string, unknown>;
export type StoreKind = 'sqlite' | 'postgres';

export interface Dialect {
  readonly kind: StoreKind;
  /** Appended to a SELECT inside a transaction to lock the rows read until the commit. */
  readonly forUpdate: string;
  /** The same, skipping rows another transaction holds (claims by several servers at once). */
  readonly skipLocked: string;
  /**
   * A row lock that does not wait for transactions inserting rows that reference the row (their
   * foreign-key check takes a key-share lock, which FOR UPDATE would wait for): PostgreSQL's
   * FOR NO KEY UPDATE.
   */
  readonly forNoKeyUpdate: string;
  /**
   * The time now, in ms since the epoch, as an SQL term read from the database's own clock, for
   * what servers sharing the store judge each other by (leases, heartbeats, Idempotency-Key
   * claims); null when the engine's clock is the process's (SQLite: one host). See clock.ts.
   */
  readonly nowMs: string | null;
}

/** What a statement inside a transaction (or a single statement on its own) can do. */
export interface Queryable {
  readonly dialect: Dialect;
  get<T = Row>(sql: string, params?: SqlParam[]): Promise<T | undefined>;
  all<T = Row>(sql: string, params?: SqlParam[]): Promise<T[]>;
  /** Returns the number of rows changed. */
  run(sql: string, params?: SqlParam[]): Promise<{ changes: number }>;
}

export interface Db extends Queryable {
  /**
   * Runs `fn` in one transaction: committed when it resolves, rolled back when it throws (the
   * error rethrown). `fn` must use the `tx` it is given, not the Db.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Tells every process listening on `channel` that something changed (new work), after the
   * commit that made it so. Best effort: listeners also look on their own every sweep.
   */
  notify(channel: string): Promise<void>;
  /**
   * Calls `onNotify` whenever any process (this one included) notifies `channel`, until close().
   * An engine without a way to hear other processes (SQLite) never calls it.
   */
  listen(channel: string, onNotify: () => void): Promise<void>;
  close(): Promise<void>;
}

/**
 * The store did not answer in time, or could not be reached: a statement ran past its timeout, no
 * connection could be had, the connection dropped (a restart, a failover, a network path gone
 * silent). Nothing this request started was committed, unless the failure hit its COMMIT: then a
 * retry with the same Idempotency-Key replays it. Answered 503 `gpu_unavailable` with Retry-After
 * (the spec's one code for "unavailable now, retry"), never a hang; the job workers hand their job
 * back as for an inference outage.
 */
export class StoreUnavailable extends CutoutError {
  constructor(cause: unknown) {
    super('gpu_unavailable', 'The service\'s database did not answer in time; retry shortly.', {
      headers: { 'Retry-After': String(LIMITS.storeRetryAfterSeconds) },
      cause,
      reason: 'store_unavailable',
    });
  }
}
