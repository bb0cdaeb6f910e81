/**
 * Stored results, downloadable until they are older than the retention: the `results` row (its
 * SQL is here, the same on both engines) and its bytes, wherever the result placement keeps them
 * (results-bytes.ts: files, the row itself, an object store). The row is written in the run's
 * transaction (ledger.ts recordRun) after its bytes were written whole, so no result exists
 * unpaid and no row points to bytes that are not there.
 *
 * The row's `path` column holds the placement's location: a file path, or an object key; with
 * the database placement it is NULL and the bytes are in `data` (PostgreSQL only).
 */
import path from 'node:path';
import { buffer } from 'node:stream/consumers';
import { LIMITS } from '../limits.js';
import { parseResultFields } from '../result-fields.js';
import type { ResultPlacement, ResultRow } from './results-bytes.js';
import { fileResults } from './results-files.js';
import { databaseResults } from './results-postgres.js';
import { boundTo, type StoreContext } from './context.js';

export type { ResultRow } from './results-bytes.js';
export { insertResultIn } from './results-row.js';

export interface StoredResult extends Omit<ResultRow, 'location'> {
  data: Buffer;
}

/** The row of `jobId`'s result, without its bytes; null when unknown or older than `ttlSeconds`. */
export async function findResult(ctx: StoreContext, jobId: string, ttlSeconds: number): Promise<ResultRow | null> {
  const row = await ctx.db.get<{ job_id: string; path: string | null; content_type: string; width: number; height: number; created_at: number; result_fields: string | null }>(
    'SELECT job_id, path, content_type, width, height, created_at, result_fields FROM results WHERE job_id = ? AND created_at > ?',
    [jobId, ctx.now() - ttlSeconds * 1000],
  );
  if (!row) return null;
  return {
    jobId: row.job_id, location: row.path, contentType: row.content_type, width: row.width, height: row.height, createdAt: row.created_at,
    fields: parseResultFields(row.result_fields),
  };
}

/**
 * Where a row's bytes are: its shape says it, so results stored before the operator changed
 * `--results` stay readable until they expire. NULL: in the row (PostgreSQL); an absolute path: a
 * file of this host; anything else: an object key of the configured object store.
 */
function placementOf(ctx: StoreContext, location: string | null): ResultPlacement {
  if (location === null) return ctx.db.dialect.kind === 'postgres' ? databaseResults : ctx.results;
  if (path.isAbsolute(location)) return ctx.results.kind === 'files' ? ctx.results : fileResults(ctx.dataDir);
  return ctx.results;
}

/** The bytes of a found result as a stream; null when gone meanwhile. ResultsUnavailable when the place cannot be reached. */
export function openResult(ctx: StoreContext, row: ResultRow) {
  return placementOf(ctx, row.location).open(ctx.db, row);
}

/**
 * A URL that fetches the result without this server, valid until the result expires but never
 * longer than SigV4 allows (7 days: a client that needs it later asks the API again, which
 * signs a new one); null when the placement cannot presign (files, the database).
 */
export async function presignResult(ctx: StoreContext, row: ResultRow, ttlSeconds: number): Promise<string | null> {
  if (!ctx.results.presign) return null;
  const left = Math.floor((row.createdAt + ttlSeconds * 1000 - ctx.now()) / 1000);
  return ctx.results.presign(row, Math.max(1, Math.min(LIMITS.presignMaxSeconds, left)));
}

/** The stored result of `jobId` with its bytes read whole (tests, small tools), or null when unknown or expired. */
export async function getResult(ctx: StoreContext, jobId: string, ttlSeconds: number): Promise<StoredResult | null> {
  const row = await findResult(ctx, jobId, ttlSeconds);
  if (!row) return null;
  const opened = await openResult(ctx, row);
  if (!opened) return null;
  const { location: _location, ...meta } = row;
  return { ...meta, data: await buffer(opened.body) };
}

/**
 * Deletes results older than `ttlSeconds`, a batch at a time: their bytes first (for S3, one
 * DeleteObjects per batch), then their rows. An expired row is never served (findResult), so
 * removing its bytes first cannot break a read that would have succeeded; and when the bytes
 * cannot be removed (an object store down) the rows stay, and the next purge tries again, so no
 * object is left without a row to find it. Safe when every server runs it at once: deleting an
 * object or a row twice is harmless. Returns how many rows went.
 */
export async function purgeResults(ctx: StoreContext, ttlSeconds: number): Promise<number> {
  const cutoff = ctx.now() - ttlSeconds * 1000;
  let purged = 0;
  for (;;) {
    const expired = await ctx.db.all<{ job_id: string; path: string | null }>(
      'SELECT job_id, path FROM results WHERE created_at <= ? ORDER BY created_at LIMIT ?', [cutoff, LIMITS.resultPurgeBatch],
    );
    if (expired.length === 0) break;
    const files = expired.map((r) => r.path).filter((p): p is string => p !== null && path.isAbsolute(p));
    const keys = expired.map((r) => r.path).filter((p): p is string => p !== null && !path.isAbsolute(p));
    if (files.length > 0) await placementOf(ctx, files[0]).remove(files);
    // Keys without an object store configured (it was switched off) cannot be deleted here: the bucket's lifecycle rule does.
    if (keys.length > 0 && ctx.results.kind === 's3') await ctx.results.remove(keys);
    const ids = expired.map((r) => r.job_id);
    purged += (await ctx.db.run(`DELETE FROM results WHERE job_id IN (${ids.map(() => '?').join(', ')})`, ids)).changes;
    if (expired.length < LIMITS.resultPurgeBatch) break;
  }
  await ctx.results.sweepStrays?.(ctx.db, cutoff);
  return purged;
}

/** Stored results (store.results): their rows, and their bytes wherever those live. */
export function resultsOf(ctx: StoreContext) {
  return Object.freeze({
    get: boundTo(ctx, getResult),
    find: boundTo(ctx, findResult),
    open: boundTo(ctx, openResult),
    presign: boundTo(ctx, presignResult),
    /** One trivial call to where result bytes live (readiness); throws when it cannot be reached. */
    ping: (): Promise<void> => ctx.results.ping(),
    purge: boundTo(ctx, purgeResults),
    /** Where result bytes live: `files`, `database` or `s3` (for health and readiness; nothing else may branch on it). */
    kind: ctx.results.kind,
    /** Where result bytes live, in words without secrets (readiness, logs). */
    description: ctx.results.description,
  });
}
export type ResultStore = ReturnType<typeof resultsOf>;
