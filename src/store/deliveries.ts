/**
 * Callback deliveries: one row per finished job with a callback URL, written in the same
 * transaction as the job's final state. Each attempt is claimed under a lease by one server
 * (FOR UPDATE SKIP LOCKED on PostgreSQL), so with many servers every attempt is sent by exactly
 * one of them; a server that dies mid-attempt leaves its lease to run out, and the attempt is made
 * again by another (delivery is at least once).
 */
import { sqlNow } from './clock.js';
import { boundTo, type StoreContext } from './context.js';
import type { Queryable } from './sql.js';

export interface Delivery {
  id: number;
  jobId: string;
  url: string;
  /** The exact text signed and sent. */
  body: string;
  /** Attempts made so far. */
  attempts: number;
  nextAttemptAt: number;
  /** The traceparent of the job's run: each attempt's span joins its trace (null: untraced). */
  traceparent: string | null;
}

export function insertDeliveryIn(tx: Queryable, jobId: string, callback: { url: string; body: string; traceparent?: string | null }, now: number) {
  return tx.run('INSERT INTO callback_deliveries (job_id, url, body, attempts, next_attempt_at, created_at, traceparent) VALUES (?, ?, ?, 0, ?, ?, ?)', [
    jobId, callback.url, callback.body, now, now, callback.traceparent ?? null,
  ]);
}

const PENDING = 'delivered_at IS NULL AND gave_up_at IS NULL';

/**
 * Claims up to `limit` pending deliveries due now and not leased by a live attempt, oldest first,
 * for `leaseMs`. Only the claimant may record their outcome. The lease is the store's clock's
 * (clock.ts: PostgreSQL's now()), so a server whose clock is off cannot take an attempt another
 * server is making; when an attempt is due (`next_attempt_at`, a retry's schedule) is the
 * servers' clock, where a skew only moves a retry.
 */
export async function claimDueDeliveries(ctx: StoreContext, limit: number, leaseMs: number): Promise<Delivery[]> {
  return ctx.db.transaction(async (tx) => {
    const now = ctx.now();
    const storeNow = sqlNow(ctx, tx);
    const rows = await tx.all<{ id: number; job_id: string; url: string; body: string; attempts: number; next_attempt_at: number; traceparent: string | null }>(
      `SELECT id, job_id, url, body, attempts, next_attempt_at, traceparent FROM callback_deliveries
        WHERE ${PENDING} AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ${storeNow})
        ORDER BY next_attempt_at, id LIMIT ?${tx.dialect.skipLocked}`,
      [now, limit],
    );
    for (const r of rows) {
      await tx.run(`UPDATE callback_deliveries SET lease_owner = ?, lease_until = ${storeNow} + ? WHERE id = ?`, [ctx.owner, leaseMs, r.id]);
    }
    return rows.map((r) => ({ id: Number(r.id), jobId: r.job_id, url: r.url, body: r.body, attempts: r.attempts, nextAttemptAt: r.next_attempt_at, traceparent: r.traceparent }));
  });
}

/** When the next pending delivery may be claimed (ms since the epoch), or null when none is pending. */
export async function nextDeliveryAt(ctx: StoreContext): Promise<number | null> {
  const row = await ctx.db.get<{ at: number | null }>(
    `SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until > next_attempt_at THEN lease_until ELSE next_attempt_at END) AS at
       FROM callback_deliveries WHERE ${PENDING}`,
  );
  return row?.at ?? null;
}

export type DeliveryUpdate =
  | { state: 'delivered'; attempts: number }
  | { state: 'retry'; attempts: number; nextAttemptAt: number; lastError: string }
  | { state: 'gave_up'; attempts: number; lastError: string };

/** Records the outcome of one claimed attempt and ends the claim. False when the claim was lost. */
export async function recordDeliveryAttempt(ctx: StoreContext, id: number, update: DeliveryUpdate): Promise<boolean> {
  const now = ctx.now();
  const mine = 'WHERE id = ? AND lease_owner = ?';
  let changes: number;
  if (update.state === 'delivered') {
    ({ changes } = await ctx.db.run(`UPDATE callback_deliveries SET attempts = ?, delivered_at = ?, last_error = NULL, lease_owner = NULL, lease_until = NULL ${mine}`, [
      update.attempts, now, id, ctx.owner,
    ]));
  } else if (update.state === 'retry') {
    ({ changes } = await ctx.db.run(`UPDATE callback_deliveries SET attempts = ?, next_attempt_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL ${mine}`, [
      update.attempts, update.nextAttemptAt, update.lastError, id, ctx.owner,
    ]));
  } else {
    ({ changes } = await ctx.db.run(`UPDATE callback_deliveries SET attempts = ?, gave_up_at = ?, last_error = ?, lease_owner = NULL, lease_until = NULL ${mine}`, [
      update.attempts, now, update.lastError, id, ctx.owner,
    ]));
  }
  return changes === 1;
}

/** Hands claimed deliveries back (a stop while their attempt is still in flight). */
export async function releaseDeliveries(ctx: StoreContext, ids: number[]): Promise<void> {
  for (const id of ids) {
    await ctx.db.run('UPDATE callback_deliveries SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?', [id, ctx.owner]);
  }
}

export interface DeliveryInfo { jobId: string; url: string; attempts: number; delivered: boolean; gaveUp: boolean; lastError: string | null }

/** The deliveries of a job (operators and tests). */
export async function deliveriesOf(ctx: StoreContext, jobId: string): Promise<DeliveryInfo[]> {
  const rows = await ctx.db.all<{ job_id: string; url: string; attempts: number; delivered_at: number | null; gave_up_at: number | null; last_error: string | null }>(
    'SELECT job_id, url, attempts, delivered_at, gave_up_at, last_error FROM callback_deliveries WHERE job_id = ? ORDER BY id', [jobId],
  );
  return rows.map((r) => ({ jobId: r.job_id, url: r.url, attempts: r.attempts, delivered: r.delivered_at !== null, gaveUp: r.gave_up_at !== null, lastError: r.last_error }));
}

/** Callback deliveries (store.deliveries). */
export function deliveriesStoreOf(ctx: StoreContext) {
  return Object.freeze({
    claimDue: boundTo(ctx, claimDueDeliveries),
    nextAt: boundTo(ctx, nextDeliveryAt),
    recordAttempt: boundTo(ctx, recordDeliveryAttempt),
    release: boundTo(ctx, releaseDeliveries),
    of: boundTo(ctx, deliveriesOf),
  });
}
export type DeliveryStore = ReturnType<typeof deliveriesStoreOf>;
