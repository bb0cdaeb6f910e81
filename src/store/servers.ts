/**
 * The servers sharing a store and their heartbeats: a running `cutout serve` writes its row every
 * third of its lease; a server that stops writing (killed, frozen, cut off) is gone once its lease
 * has passed, and its pending Idempotency-Key claims are then taken over (idempotency.ts).
 */
import { serverIdentity } from '../identity.js';
import { LIMITS } from '../limits.js';
import type { StoreContext } from './ledger.js';

export async function heartbeat(ctx: StoreContext, leaseMs: number): Promise<void> {
  const me = serverIdentity();
  const now = Date.now();
  await ctx.db.run(
    `INSERT INTO servers (id, host, pid, started_at, heartbeat_at, lease_ms) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, lease_ms = excluded.lease_ms`,
    [ctx.owner, me.host, me.pid, Date.parse(me.startedAt), now, leaseMs],
  );
}

/** Removes this server's row (a clean stop) and rows silent for an hour past their lease. */
export async function leave(ctx: StoreContext): Promise<void> {
  await ctx.db.run('DELETE FROM servers WHERE id = ? OR heartbeat_at + lease_ms < ?', [ctx.owner, Date.now() - LIMITS.serverRowRetentionMs]);
}

export interface ServerInfo { id: string; host: string; pid: number; startedAt: number; heartbeatAt: number; alive: boolean }

/** The servers that have a row (operators and tests). */
export async function listServers(ctx: StoreContext): Promise<ServerInfo[]> {
  const rows = await ctx.db.all<{ id: string; host: string; pid: number; started_at: number; heartbeat_at: number; lease_ms: number }>(
    'SELECT id, host, pid, started_at, heartbeat_at, lease_ms FROM servers ORDER BY started_at',
  );
  const now = Date.now();
  return rows.map((r) => ({ id: r.id, host: r.host, pid: r.pid, startedAt: r.started_at, heartbeatAt: r.heartbeat_at, alive: r.heartbeat_at + r.lease_ms > now }));
}
