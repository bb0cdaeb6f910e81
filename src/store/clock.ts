/**
 * The clock the servers sharing a store judge each other by: job leases, heartbeats and
 * Idempotency-Key claims (when a claim was made, how old it is, when it expires).
 *
 *   - PostgreSQL: the database's own clock, `now()` in the statement itself, as pg-boss and
 *     graphile-worker do. Every server of a fleet reads the one clock, so a server whose clock is
 *     off can neither take a live lease from another (it does not decide that a lease ran out)
 *     nor stretch its own (it does not decide when its lease ends).
 *   - SQLite: this process's clock (`ctx.now`, which tests replace): every server on one SQLite
 *     file runs on one host, with one clock. Its reading is written into the statement as an
 *     integer literal (a number this code makes, never input).
 *
 * `now()` is the start of the statement's transaction: within one transaction every use agrees.
 */
import type { StoreContext } from './context.js';
import type { Queryable } from './sql.js';

/** "Now" in ms since the epoch as a term of SQL, for a statement run on `q`. */
export function sqlNow(ctx: StoreContext, q: Queryable = ctx.db): string {
  return q.dialect.nowMs ?? String(Math.floor(ctx.now()));
}

/** PostgreSQL's `now()` in ms since the epoch, the unit of every time column. */
export const POSTGRES_NOW_MS = 'CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)';
