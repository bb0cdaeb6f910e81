/**
 * The per-key sliding-window rate limit, counted in the store so that every server behind a load
 * balancer shares one window per key.
 *
 * Semantics: a sliding log, which keeps the specification's promise (api-spec 8.3: N requests per
 * minute, sliding window): at most `limit` requests are admitted in any `windowMs`. A GCRA (as
 * redis-cell) with a burst of N and one request every 60/N s would admit up to 2N - 1 in one
 * minute (a burst of N, then one more every 60/N s while the first ones are still within the
 * minute), so it was not chosen. Refused requests are not logged, so a client that backs off as
 * told gets through.
 *
 * The log is one row per key: the times (ms, ascending) of the newest `limit` admitted requests.
 * The request at time `now` is admitted when fewer than `limit` stamps are in the window, that is
 * when the log holds fewer than `limit` stamps or its `limit`-th newest is at most `now - windowMs`.
 * That decision, the new log and what the headers need are ONE statement, an
 * `INSERT ... ON CONFLICT DO UPDATE ... RETURNING` under the row's lock: concurrent requests on any
 * number of servers are counted exactly, with no transaction around it.
 *
 * `now` is the store's clock (clock.ts): on PostgreSQL the database's `now()`, read in that same
 * statement, so a server whose clock is off neither grants nor refuses extra requests; on SQLite
 * this process's (one host). A stamp is never earlier than the stamp before it (a statement that
 * waited for the lock behind a later one takes the later time), so the log stays sorted.
 * `refused` counts the requests refused since the last admitted one: the statement's answer says
 * whether this one was admitted (0) without a second read.
 */
import { sqlNow } from './clock.js';
import { boundTo, type StoreContext } from './context.js';
import type { Queryable, SqlParam } from './sql.js';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds when the oldest counted request leaves the window (one more request is then allowed). */
  reset: number;
  /** Seconds to wait, when refused. */
  retryAfter: number;
}

/**
 * The decision the headers show, from the log as the statement left it (ascending ms), whether
 * this request was admitted, and `now` (the statement's). Pure.
 */
export function decisionOf(log: readonly number[], allowed: boolean, limit: number, windowMs: number, now: number): RateDecision {
  const inWindow = log.filter((t) => t > now - windowMs);
  const resetMs = (inWindow[0] ?? now) + windowMs;
  // Refused: the next request is admitted once the limit-th newest stamp has left the window
  // (the oldest one, unless the log is longer than a limit that was lowered since).
  const nextMs = (inWindow[inWindow.length - limit] ?? inWindow[0] ?? now) + windowMs;
  return {
    allowed,
    limit,
    remaining: Math.max(0, limit - inWindow.length),
    reset: Math.ceil(resetMs / 1000),
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil((nextMs - now) / 1000)),
  };
}

/**
 * The upsert on each engine: `?` are, in order, the key, then `limit, limit, windowMs` for each of
 * the three admission tests and one `limit` for the trim (see `params`). PostgreSQL keeps the log
 * as BIGINT[], SQLite as a JSON array: no portable SQL appends to and slices both, so the
 * statement is written once per engine, side by side and of the same shape, rather than spread
 * over the engine files.
 */
function upsertSql(q: Queryable, now: string): string {
  if (q.dialect.kind === 'postgres') {
    const n = 'cardinality(w.hits)';
    const admit = `(${n} < ? OR w.hits[${n} + 1 - ?] <= ${now} - ?)`;
    return `INSERT INTO rate_windows AS w (rate_key, hits, refused, updated_at) VALUES (?, ARRAY[${now}]::BIGINT[], 0, ${now})
      ON CONFLICT (rate_key) DO UPDATE SET
        hits = CASE WHEN ${admit} THEN (w.hits || GREATEST(${now}, w.hits[${n}]))[GREATEST(1, ${n} + 2 - ?):] ELSE w.hits END,
        refused = CASE WHEN ${admit} THEN 0 ELSE w.refused + 1 END,
        updated_at = CASE WHEN ${admit} THEN ${now} ELSE w.updated_at END
      RETURNING hits, refused, ${now} AS now`;
  }
  const n = 'json_array_length(w.hits)';
  const admit = `(${n} < ? OR json_extract(w.hits, '$[#-' || ? || ']') <= ${now} - ?)`;
  // json_each's key is the index: the appended log keeps its newest `limit` entries, in order.
  const appended = `json_insert(w.hits, '$[#]', MAX(${now}, COALESCE(json_extract(w.hits, '$[#-1]'), 0)))`;
  return `INSERT INTO rate_windows AS w (rate_key, hits, refused, updated_at) VALUES (?, json_array(${now}), 0, ${now})
    ON CONFLICT (rate_key) DO UPDATE SET
      hits = CASE WHEN ${admit} THEN (SELECT json_group_array(value ORDER BY key) FROM json_each(${appended}) WHERE key > ${n} - ?) ELSE w.hits END,
      refused = CASE WHEN ${admit} THEN 0 ELSE w.refused + 1 END,
      updated_at = CASE WHEN ${admit} THEN ${now} ELSE w.updated_at END
    RETURNING hits, refused, ${now} AS now`;
}

function params(rateKey: string, limit: number, windowMs: number): SqlParam[] {
  const admit = [limit, limit, windowMs];
  return [rateKey, ...admit, limit, ...admit, ...admit];
}

/**
 * Counts one request of `rateKey` against `limit` per `windowMs`, atomically across servers, in
 * one statement stamped by the store's clock (see the header).
 */
export async function hitRateLimit(ctx: StoreContext, rateKey: string, limit: number, windowMs: number): Promise<RateDecision> {
  const row = await ctx.db.get<{ hits: string | readonly (string | number)[]; refused: number | string; now: number | string }>(
    upsertSql(ctx.db, sqlNow(ctx)), params(rateKey, limit, windowMs),
  );
  if (!row) throw new Error('The rate limit\'s upsert returned no row');
  // SQLite answers the log as JSON text; PostgreSQL a BIGINT[] as strings.
  const log = (typeof row.hits === 'string' ? JSON.parse(row.hits) as number[] : row.hits).map(Number);
  return decisionOf(log, Number(row.refused) === 0, limit, windowMs, Number(row.now));
}

/** Forgets windows whose last admitted request has left the window (by the store's clock, as they were stamped). */
export async function purgeRateWindows(ctx: StoreContext, windowMs: number): Promise<number> {
  return (await ctx.db.run(`DELETE FROM rate_windows WHERE updated_at <= ${sqlNow(ctx)} - ?`, [windowMs])).changes;
}

/** The rate limit's windows (store.rateLimits). */
export function rateLimitsOf(ctx: StoreContext) {
  return Object.freeze({
    hit: boundTo(ctx, hitRateLimit),
    purge: boundTo(ctx, purgeRateWindows),
  });
}
export type RateLimitStore = ReturnType<typeof rateLimitsOf>;
