/**
 * Idempotency keys (Stripe's semantics, scoped per account and endpoint). The first request with
 * a key claims it with a `pending` row, inside a transaction, so of two concurrent requests only
 * one ever does the work and the charge. A success stores the response to replay; a failure
 * releases the key (nothing was charged, so a retry may run again). Rows live for the window.
 * When a claim was made, how old it is and when it expires are the store's clock's to say
 * (clock.ts): a server whose clock is off cannot judge another's live claim stale.
 */
import { sqlNow } from './clock.js';
import { boundTo, type StoreContext } from './context.js';
import type { Queryable } from './sql.js';

export type IdempotencyClaim =
  /** The caller owns the key now: do the work, then complete or release. */
  | { state: 'claimed' }
  /** Another request with this key is still running. */
  | { state: 'pending' }
  /** A finished request with the same parameters: replay this. */
  | { state: 'done'; response: unknown }
  /** The key was used with different parameters or input. */
  | { state: 'mismatch' };

export interface IdempotencyRef { accountId: string; endpoint: string; key: string }

interface ClaimOwner { owner: string | null; owner_pid: number | null }

/**
 * Whether the server that made a pending claim still runs: a claim belongs to a server identity
 * (host, pid, start), judged by the engine (a pid probe on SQLite, the heartbeat on PostgreSQL).
 */
function claimOwnerAlive(ctx: StoreContext, q: Queryable, row: ClaimOwner): Promise<boolean> {
  return ctx.liveness.ownerAlive(q, row.owner, row.owner_pid, ctx.owner);
}

/**
 * Thrown by completeIdempotencyKey when this server's pending claim is gone: another server took
 * it over (this one's heartbeat had stopped) and runs the request itself. Thrown inside the
 * transaction of the charge, so the charge rolls back: the request is charged once, by the owner.
 */
export class IdempotencyClaimLost extends Error {
  constructor() {
    super('The Idempotency-Key claim was taken over by another server.');
    this.name = 'IdempotencyClaimLost';
  }
}

export function claimIdempotencyKey(ctx: StoreContext, ref: IdempotencyRef, fingerprint: string, ttlSeconds: number): Promise<IdempotencyClaim> {
  return ctx.db.transaction(async (tx) => {
    const now = sqlNow(ctx, tx);
    await tx.run(`DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND created_at <= ${now} - ?`, [
      ref.accountId, ref.endpoint, ref.key, ttlSeconds * 1000,
    ]);
    // Insert-or-keep first: of two servers claiming one key at once, exactly one inserts.
    const { changes } = await tx.run(
      `INSERT INTO idempotency_keys (account_id, endpoint, key, fingerprint, state, created_at, owner_pid, owner) VALUES (?, ?, ?, ?, 'pending', ${now}, ?, ?)
       ON CONFLICT (account_id, endpoint, key) DO NOTHING`,
      [ref.accountId, ref.endpoint, ref.key, fingerprint, process.pid, ctx.owner],
    );
    if (changes === 1) return { state: 'claimed' };
    let row = await tx.get<{ fingerprint: string; state: string; response: string | null; owner_pid: number | null; owner: string | null }>(
      `SELECT fingerprint, state, response, owner_pid, owner FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ?${tx.dialect.forUpdate}`,
      [ref.accountId, ref.endpoint, ref.key],
    );
    if (row && row.state === 'pending' && !(await claimOwnerAlive(ctx, tx, row))) {
      // Its process died mid-request: nothing was charged, so the key is free again.
      await tx.run("DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending'", [
        ref.accountId, ref.endpoint, ref.key,
      ]);
      row = undefined;
    }
    if (!row) {
      // Under READ COMMITTED another server may have taken the same dead claim over and inserted
      // between our delete and this insert: then it owns the key and this request waits for it.
      const taken = await tx.run(
        `INSERT INTO idempotency_keys (account_id, endpoint, key, fingerprint, state, created_at, owner_pid, owner) VALUES (?, ?, ?, ?, 'pending', ${now}, ?, ?)
         ON CONFLICT (account_id, endpoint, key) DO NOTHING`,
        [ref.accountId, ref.endpoint, ref.key, fingerprint, process.pid, ctx.owner],
      );
      return { state: taken.changes === 1 ? 'claimed' : 'pending' };
    }
    if (row.fingerprint !== fingerprint) return { state: 'mismatch' };
    if (row.state === 'pending') return { state: 'pending' };
    return { state: 'done', response: JSON.parse(row.response as string) as unknown };
  });
}

/**
 * Stores the response to replay; the window counts from the first request. `q`: the transaction
 * of the charge or the job rows, so that the key is done exactly when they are committed (a crash
 * in between would otherwise let a retry charge again).
 */
export async function completeIdempotencyKey(ctx: StoreContext, ref: IdempotencyRef, response: unknown, q: Queryable = ctx.db): Promise<void> {
  // Only our own pending claim: a claim taken over by another server is that server's to answer.
  const { changes } = await q.run(
    "UPDATE idempotency_keys SET state = 'done', response = ?, owner_pid = NULL, owner = NULL WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending' AND owner = ?",
    [JSON.stringify(response), ref.accountId, ref.endpoint, ref.key, ctx.owner],
  );
  if (changes !== 1) throw new IdempotencyClaimLost();
}

/** Forgets this server's pending claim after a failure, so the key can be used again. */
export async function releaseIdempotencyKey(ctx: StoreContext, ref: IdempotencyRef): Promise<void> {
  await ctx.db.run("DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending' AND owner = ?", [
    ref.accountId, ref.endpoint, ref.key, ctx.owner,
  ]);
}

/**
 * Drops the exact pending claim a waiter saw (same owner, same creation time): one that has
 * outlived any request. A newer claim made since, by whichever server, stays.
 */
export async function releaseStaleIdempotencyClaim(ctx: StoreContext, ref: IdempotencyRef, seen: { owner: string | null; createdAt: number }): Promise<void> {
  await ctx.db.run(
    "DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending' AND owner IS NOT DISTINCT FROM ? AND created_at = ?",
    [ref.accountId, ref.endpoint, ref.key, seen.owner, seen.createdAt],
  );
}

/**
 * The key's pending claim: how long ago it was made, in ms, and whether its process still runs;
 * null when no claim is pending.
 */
export interface PendingClaim { ageMs: number; ownerAlive: boolean; owner: string | null; createdAt: number }

export async function pendingIdempotencyClaim(ctx: StoreContext, ref: IdempotencyRef): Promise<PendingClaim | null> {
  const row = await ctx.db.get<{ created_at: number; age_ms: number; owner_pid: number | null; owner: string | null }>(
    `SELECT created_at, ${sqlNow(ctx)} - created_at AS age_ms, owner_pid, owner FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending'`,
    [ref.accountId, ref.endpoint, ref.key],
  );
  if (!row) return null;
  return { ageMs: Number(row.age_ms), ownerAlive: await claimOwnerAlive(ctx, ctx.db, row), owner: row.owner, createdAt: Number(row.created_at) };
}

/**
 * Run at server start: drops pending claims whose process has died (a server killed
 * mid-request) and expired rows. Claims of another live server on the same data directory stay.
 */
export async function resetIdempotencyKeys(ctx: StoreContext, ttlSeconds: number): Promise<void> {
  await ctx.db.run(`DELETE FROM idempotency_keys WHERE created_at <= ${sqlNow(ctx)} - ?`, [ttlSeconds * 1000]);
  await releaseClaimsOfGoneServers(ctx);
}

/**
 * Releases the pending claims of servers that are gone (a dead pid on SQLite, a heartbeat past
 * its lease on PostgreSQL): their requests will never finish, and nothing was charged for them.
 * One liveness check per server holding claims, not per claim. Returns how many were released.
 */
export async function releaseClaimsOfGoneServers(ctx: StoreContext): Promise<number> {
  const owners = await ctx.db.all<{ owner_pid: number | null; owner: string | null }>(
    "SELECT DISTINCT owner_pid, owner FROM idempotency_keys WHERE state = 'pending' AND owner IS DISTINCT FROM ?", [ctx.owner],
  );
  let released = 0;
  for (const row of owners) {
    if (await claimOwnerAlive(ctx, ctx.db, row)) continue;
    const { changes } = await ctx.db.run(
      "DELETE FROM idempotency_keys WHERE state = 'pending' AND owner IS NOT DISTINCT FROM ? AND owner_pid IS NOT DISTINCT FROM ?",
      [row.owner, row.owner_pid],
    );
    released += changes;
  }
  return released;
}

/** Deletes rows older than the window. */
export async function purgeIdempotencyKeys(ctx: StoreContext, ttlSeconds: number): Promise<number> {
  const { changes } = await ctx.db.run(`DELETE FROM idempotency_keys WHERE state = 'done' AND created_at <= ${sqlNow(ctx)} - ?`, [ttlSeconds * 1000]);
  return changes;
}

/** Idempotency-Key claims (store.idempotency). */
export function idempotencyOf(ctx: StoreContext) {
  return Object.freeze({
    claim: boundTo(ctx, claimIdempotencyKey),
    complete: boundTo(ctx, completeIdempotencyKey),
    release: boundTo(ctx, releaseIdempotencyKey),
    releaseStale: boundTo(ctx, releaseStaleIdempotencyClaim),
    pending: boundTo(ctx, pendingIdempotencyClaim),
    reset: boundTo(ctx, resetIdempotencyKeys),
    purge: boundTo(ctx, purgeIdempotencyKeys),
  });
}
export type IdempotencyStore = ReturnType<typeof idempotencyOf>;
