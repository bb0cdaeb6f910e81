/**
 * The per-key sliding-window rate limit, counted in the store so that every server behind a load
 * balancer shares one window per key. The window is the log of the request times (ms) of the last
 * `windowMs`, at most `limit` numbers, held as JSON in one row per key; a request reads and
 * rewrites it in one transaction under the row's lock, so concurrent requests on many servers are
 * counted exactly. Refused requests are not counted, so a client that backs off as told gets
 * through.
 */
import { sqlNow } from './clock.js';
import type { StoreContext } from './ledger.js';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds when the oldest counted request leaves the window (one more request is then allowed). */
  reset: number;
  /** Seconds to wait, when refused. */
  retryAfter: number;
}

/** The decision for a window log after one more request at `now` was (or was not) counted. Pure. */
export function decide(log: number[], limit: number, windowMs: number, now: number): { decision: RateDecision; log: number[] } {
  const recent = log.filter((t) => t > now - windowMs);
  const allowed = recent.length < limit;
  if (allowed) recent.push(now);
  const resetMs = (recent[0] ?? now) + windowMs;
  return {
    log: recent,
    decision: {
      allowed,
      limit,
      remaining: Math.max(0, limit - recent.length),
      reset: Math.ceil(resetMs / 1000),
      retryAfter: allowed ? 0 : Math.max(1, Math.ceil((resetMs - now) / 1000)),
    },
  };
}

/**
 * Counts one request of `rateKey` against `limit` per `windowMs`, atomically across servers. The
 * request's time is the store's clock (clock.ts: PostgreSQL's `now()`), read in the statement
 * that locks the row, so that a server whose clock is off neither grants nor refuses extra
 * requests: every server of a fleet stamps the one log by one clock.
 */
export function hitRateLimit(ctx: StoreContext, rateKey: string, limit: number, windowMs: number): Promise<RateDecision> {
  return ctx.db.transaction(async (tx) => {
    await tx.run(`INSERT INTO rate_windows (rate_key, hits, updated_at) VALUES (?, '[]', ${sqlNow(ctx, tx)}) ON CONFLICT (rate_key) DO NOTHING`, [rateKey]);
    const row = await tx.get<{ hits: string; now: number | string }>(`SELECT hits, ${sqlNow(ctx, tx)} AS now FROM rate_windows WHERE rate_key = ?${tx.dialect.forUpdate}`, [rateKey]);
    // PostgreSQL answers a BIGINT as a string.
    const now = Number(row?.now ?? ctx.now());
    const { decision, log } = decide(JSON.parse(row?.hits ?? '[]') as number[], limit, windowMs, now);
    if (decision.allowed) await tx.run('UPDATE rate_windows SET hits = ?, updated_at = ? WHERE rate_key = ?', [JSON.stringify(log), now, rateKey]);
    return decision;
  });
}

/** Forgets windows with no request in the last `windowMs` (by the store's clock, as they were stamped). */
export async function purgeRateWindows(ctx: StoreContext, windowMs: number): Promise<number> {
  return (await ctx.db.run(`DELETE FROM rate_windows WHERE updated_at <= ${sqlNow(ctx)} - ?`, [windowMs])).changes;
}
