/**
 * The audit trail (store.audit): who changed what, append-only. Every admin request (done or
 * refused) and every key or credit change from the CLI is one row, stamped by the store's clock
 * (clock.ts: PostgreSQL's own on a fleet), with its actor, action, target, request id and
 * outcome. Nothing here updates or deletes a row, and the database refuses it too (triggers of
 * migrations.ts 11 and migrations-postgres.ts 9), so no later program can quietly edit history.
 *
 * A change and its event commit together: the store's functions that change keys or credits take
 * an `AuditActor` and write the event inside their own transaction (`auditIn`); the actor's
 * `onRecorded` hears of it after the commit (the door's JSON log line).
 */
import { sqlNow } from './clock.js';
import { boundTo, type StoreContext } from './context.js';
import type { Queryable } from './sql.js';

export type AuditOutcome = 'ok' | 'refused' | 'failed';

export interface AuditEvent {
  id: number;
  /** ISO 8601, from the store's clock. */
  at: string;
  /** `admin`, `cli:<os user>`, `key:<id>` (a customer's key at an admin route), `anonymous`. */
  actor: string;
  /** `key.create`, `key.update`, `key.revoke`, `credits.add`, `key.list`, ... */
  action: string;
  target: string | null;
  requestId: string | null;
  outcome: AuditOutcome;
  /** What changed or why it was refused; never a secret. */
  detail: Record<string, unknown> | null;
}

export type NewAuditEvent = Omit<AuditEvent, 'id' | 'at' | 'requestId' | 'target' | 'detail'> & Partial<Pick<AuditEvent, 'requestId' | 'target' | 'detail'>>;

/** Who makes a change, given to the store's changing functions; `onRecorded` is called after the commit. */
export interface AuditActor {
  actor: string;
  requestId?: string | null;
  onRecorded?: (event: AuditEvent) => void;
}

interface AuditRow { id: number | string; at: number | string; actor: string; action: string; target: string | null; request_id: string | null; outcome: AuditOutcome; detail: string | null }

function eventOf(r: AuditRow): AuditEvent {
  return {
    id: Number(r.id), at: new Date(Number(r.at)).toISOString(), actor: r.actor, action: r.action, target: r.target,
    requestId: r.request_id, outcome: r.outcome, detail: r.detail === null ? null : JSON.parse(r.detail) as Record<string, unknown>,
  };
}

const COLUMNS = 'id, at, actor, action, target, request_id, outcome, detail';

/** Appends one event on `q` (a transaction of the change it records, or the store). */
export async function appendAudit(ctx: StoreContext, event: NewAuditEvent, q: Queryable = ctx.db): Promise<AuditEvent> {
  const row = await q.get<AuditRow>(
    `INSERT INTO audit_events (at, actor, action, target, request_id, outcome, detail) VALUES (${sqlNow(ctx, q)}, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
    [event.actor, event.action, event.target ?? null, event.requestId ?? null, event.outcome, event.detail ? JSON.stringify(event.detail) : null],
  );
  if (!row) throw new Error('The audit insert returned no row');
  return eventOf(row);
}

/** Appends a change's event inside its transaction `tx` when an actor is given; null otherwise. */
export async function auditIn(ctx: StoreContext, tx: Queryable, actor: AuditActor | undefined, event: Omit<NewAuditEvent, 'actor' | 'requestId' | 'outcome'>): Promise<AuditEvent | null> {
  if (!actor) return null;
  return appendAudit(ctx, { ...event, actor: actor.actor, requestId: actor.requestId ?? null, outcome: 'ok' }, tx);
}

export interface AuditQuery {
  /** ms since the epoch: events at or after it. */
  since?: number | null;
  action?: string | null;
  /** The page after this event id (the `next` of the previous page). */
  after?: number | null;
  limit: number;
}

/** One page of events, oldest first, and the cursor of the next page (null: none). */
export async function listAudit(ctx: StoreContext, query: AuditQuery): Promise<{ events: AuditEvent[]; next: number | null }> {
  const rows = await ctx.db.all<AuditRow>(
    `SELECT ${COLUMNS} FROM audit_events WHERE at >= ? AND (CAST(? AS TEXT) IS NULL OR action = ?) AND id > ? ORDER BY id LIMIT ?`,
    [query.since ?? 0, query.action ?? null, query.action ?? null, query.after ?? 0, query.limit + 1],
  );
  const events = rows.slice(0, query.limit).map(eventOf);
  return { events, next: rows.length > query.limit ? events[events.length - 1].id : null };
}

/** The audit trail (store.audit). */
export function auditOf(ctx: StoreContext) {
  return Object.freeze({
    append: boundTo(ctx, appendAudit),
    list: boundTo(ctx, listAudit),
  });
}
export type AuditStore = ReturnType<typeof auditOf>;
