/**
 * Stored results, downloadable until they are older than the retention. The bytes live where the
 * engine keeps them (engine.ts: files for SQLite, BYTEA for PostgreSQL); they are recorded in the
 * run's transaction (ledger.ts recordRun), so no result exists unpaid.
 */
import type { StoredResultRow } from './engine.js';
import type { StoreContext } from './ledger.js';

export type StoredResult = StoredResultRow;

/** The stored result of `jobId` with its bytes, or null when unknown or older than `ttlSeconds`. */
export function getResult(ctx: StoreContext, jobId: string, ttlSeconds: number): Promise<StoredResult | null> {
  return ctx.payloads.readResult(ctx.db, jobId, ctx.now() - ttlSeconds * 1000);
}

/** Deletes results older than `ttlSeconds`. Safe when every server runs it at once. Returns how many went. */
export function purgeResults(ctx: StoreContext, ttlSeconds: number): Promise<number> {
  return ctx.payloads.purgeResults(ctx.db, ctx.now() - ttlSeconds * 1000);
}
