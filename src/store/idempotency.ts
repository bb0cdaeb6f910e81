/**
 * Idempotency keys (Stripe's semantics, scoped per account and endpoint). The first request with
 * a key claims it with a `pending` row, inside a transaction, so of two concurrent requests only
 * one ever does the work and the charge. A success stores the response to replay; a failure
 * releases the key (nothing was charged, so a retry may run again). Rows live for the window.
 */
import type { StoreContext } from './ledger.js';
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
  return ctx.liveness.ownerAlive(q, row.owner, row.owner_pid);
}

export function claimIdempotencyKey(ctx: StoreContext, ref: IdempotencyRef, fingerprint: string, ttlSeconds: number): Promise<IdempotencyClaim> {
  return ctx.db.transaction(async (tx) => {
    const now = ctx.now();
    await tx.run('DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND created_at <= ?', [
      ref.accountId, ref.endpoint, ref.key, now - ttlSeconds * 1000,
    ]);
    // Insert-or-keep first: of two servers claiming one key at once, exactly one inserts.
    const { changes } = await tx.run(
      `INSERT INTO idempotency_keys (account_id, endpoint, key, fingerprint, state, created_at, owner_pid, owner) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)
       ON CONFLICT (account_id, endpoint, key) DO NOTHING`,
      [ref.accountId, ref.endpoint, ref.key, fingerprint, now, process.pid, ctx.owner],
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
      await tx.run(
        "INSERT INTO idempotency_keys (account_id, endpoint, key, fingerprint, state, created_at, owner_pid, owner) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
        [ref.accountId, ref.endpoint, ref.key, fingerprint, now, process.pid, ctx.owner],
      );
      return { state: 'claimed' };
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
  await q.run("UPDATE idempotency_keys SET state = 'done', response = ?, owner_pid = NULL, owner = NULL WHERE account_id = ? AND endpoint = ? AND key = ?", [
    JSON.stringify(response), ref.accountId, ref.endpoint, ref.key,
  ]);
}

/** Forgets a pending claim after a failure, so the key can be used again. */
export async function releaseIdempotencyKey(ctx: StoreContext, ref: IdempotencyRef): Promise<void> {
  await ctx.db.run("DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending'", [
    ref.accountId, ref.endpoint, ref.key,
  ]);
}

/** Drops a pending claim only if it still belongs to `owner` (taking over a dead server's claim). */
async function releaseClaimOf(ctx: StoreContext, ref: IdempotencyRef, row: ClaimOwner): Promise<void> {
  await ctx.db.run(
    "DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending' AND owner IS NOT DISTINCT FROM ? AND owner_pid IS NOT DISTINCT FROM ?",
    [ref.accountId, ref.endpoint, ref.key, row.owner, row.owner_pid],
  );
}

/**
 * The key's pending claim: how long ago it was made, in ms, and whether its process still runs;
 * null when no claim is pending.
 */
export async function pendingIdempotencyClaim(ctx: StoreContext, ref: IdempotencyRef): Promise<{ ageMs: number; ownerAlive: boolean } | null> {
  const row = await ctx.db.get<{ created_at: number; owner_pid: number | null; owner: string | null }>(
    "SELECT created_at, owner_pid, owner FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending'",
    [ref.accountId, ref.endpoint, ref.key],
  );
  return row ? { ageMs: ctx.now() - row.created_at, ownerAlive: await claimOwnerAlive(ctx, ctx.db, row) } : null;
}

/**
 * Run at server start: drops pending claims whose process has died (a server killed
 * mid-request) and expired rows. Claims of another live server on the same data directory stay.
 */
export async function resetIdempotencyKeys(ctx: StoreContext, ttlSeconds: number): Promise<void> {
  await ctx.db.run('DELETE FROM idempotency_keys WHERE created_at <= ?', [ctx.now() - ttlSeconds * 1000]);
  const pending = await ctx.db.all<{ account_id: string; endpoint: string; key: string; owner_pid: number | null; owner: string | null }>(
    "SELECT account_id, endpoint, key, owner_pid, owner FROM idempotency_keys WHERE state = 'pending'",
  );
  for (const row of pending) {
    if (await claimOwnerAlive(ctx, ctx.db, row)) continue;
    await releaseClaimOf(ctx, { accountId: row.account_id, endpoint: row.endpoint, key: row.key }, row);
  }
}

/** Deletes rows older than the window. */
export async function purgeIdempotencyKeys(ctx: StoreContext, ttlSeconds: number): Promise<number> {
  const { changes } = await ctx.db.run("DELETE FROM idempotency_keys WHERE state = 'done' AND created_at <= ?", [ctx.now() - ttlSeconds * 1000]);
  return changes;
}
