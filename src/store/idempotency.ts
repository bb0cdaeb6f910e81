/**
 * Idempotency keys (Stripe's semantics, scoped per account and endpoint). The first request with
 * a key claims it with a `pending` row, inside a transaction, so of two concurrent requests only
 * one ever does the work and the charge. A success stores the response to replay; a failure
 * releases the key (nothing was charged, so a retry may run again). Rows live for the window.
 */
import type { StoreContext } from './ledger.js';

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

export function claimIdempotencyKey(ctx: StoreContext, ref: IdempotencyRef, fingerprint: string, ttlSeconds: number): Promise<IdempotencyClaim> {
  return ctx.db.transaction(async (tx) => {
    const now = ctx.now();
    await tx.run('DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND created_at <= ?', [
      ref.accountId, ref.endpoint, ref.key, now - ttlSeconds * 1000,
    ]);
    const row = await tx.get<{ fingerprint: string; state: string; response: string | null }>(
      'SELECT fingerprint, state, response FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ?',
      [ref.accountId, ref.endpoint, ref.key],
    );
    if (!row) {
      await tx.run("INSERT INTO idempotency_keys (account_id, endpoint, key, fingerprint, state, created_at) VALUES (?, ?, ?, ?, 'pending', ?)", [
        ref.accountId, ref.endpoint, ref.key, fingerprint, now,
      ]);
      return { state: 'claimed' };
    }
    if (row.fingerprint !== fingerprint) return { state: 'mismatch' };
    if (row.state === 'pending') return { state: 'pending' };
    return { state: 'done', response: JSON.parse(row.response as string) as unknown };
  });
}

/** Stores the response to replay; the window counts from the first request. */
export async function completeIdempotencyKey(ctx: StoreContext, ref: IdempotencyRef, response: unknown): Promise<void> {
  await ctx.db.run("UPDATE idempotency_keys SET state = 'done', response = ? WHERE account_id = ? AND endpoint = ? AND key = ?", [
    JSON.stringify(response), ref.accountId, ref.endpoint, ref.key,
  ]);
}

/** Forgets a pending claim after a failure, so the key can be used again. */
export async function releaseIdempotencyKey(ctx: StoreContext, ref: IdempotencyRef): Promise<void> {
  await ctx.db.run("DELETE FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending'", [
    ref.accountId, ref.endpoint, ref.key,
  ]);
}

/** How long ago the key's pending claim was made, in ms; null when no claim is pending. */
export async function pendingIdempotencyAgeMs(ctx: StoreContext, ref: IdempotencyRef): Promise<number | null> {
  const row = await ctx.db.get<{ created_at: number }>(
    "SELECT created_at FROM idempotency_keys WHERE account_id = ? AND endpoint = ? AND key = ? AND state = 'pending'",
    [ref.accountId, ref.endpoint, ref.key],
  );
  return row ? ctx.now() - row.created_at : null;
}

/** Drops pending claims left by a server that stopped mid-request (run at server start), and expired rows. */
export async function resetIdempotencyKeys(ctx: StoreContext, ttlSeconds: number): Promise<void> {
  await ctx.db.run("DELETE FROM idempotency_keys WHERE state = 'pending' OR created_at <= ?", [ctx.now() - ttlSeconds * 1000]);
}

/** Deletes rows older than the window. */
export async function purgeIdempotencyKeys(ctx: StoreContext, ttlSeconds: number): Promise<number> {
  const { changes } = await ctx.db.run("DELETE FROM idempotency_keys WHERE state = 'done' AND created_at <= ?", [ctx.now() - ttlSeconds * 1000]);
  return changes;
}
