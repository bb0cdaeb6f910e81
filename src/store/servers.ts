/**
 * The servers sharing a store and their heartbeats: a running `cutout serve` writes its row every
 * third of its lease; a server that stops writing (killed, frozen, cut off) is gone once its lease
 * has passed, and its pending Idempotency-Key claims are then taken over (idempotency.ts). Every
 * time here is the store's clock (clock.ts): on PostgreSQL the database's `now()`, so a server
 * whose clock is off neither looks dead to the others nor keeps a dead peer looking alive.
 *
 * Any running server's heartbeat timer also sweeps (`sweepGoneServers`): the rows of servers
 * silent for LIMITS.serverRowRetentionMs past their lease go, and the pending claims of servers
 * gone are released, without waiting for a server to start or stop.
 */
import { serverIdentity } from '../identity.js';
import { LIMITS } from '../limits.js';
import { sqlNow } from './clock.js';
import { releaseClaimsOfGoneServers } from './idempotency.js';
import { boundTo, type StoreContext } from './context.js';

export async function heartbeat(ctx: StoreContext, leaseMs: number): Promise<void> {
  const me = serverIdentity();
  await ctx.db.run(
    `INSERT INTO servers (id, host, pid, started_at, heartbeat_at, lease_ms) VALUES (?, ?, ?, ?, ${sqlNow(ctx)}, ?)
     ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, lease_ms = excluded.lease_ms`,
    [ctx.owner, me.host, me.pid, Date.parse(me.startedAt), leaseMs],
  );
}

/** Rows silent for the retention past their lease: the servers that died. */
function longGone(ctx: StoreContext): string {
  return `heartbeat_at + lease_ms < ${sqlNow(ctx)} - ${LIMITS.serverRowRetentionMs}`;
}

/** Removes this server's row (a clean stop) and rows silent for an hour past their lease. */
export async function leave(ctx: StoreContext): Promise<void> {
  await ctx.db.run(`DELETE FROM servers WHERE id = ? OR ${longGone(ctx)}`, [ctx.owner]);
}

/**
 * Run by every server's timer: removes the rows of servers silent for the retention past their
 * lease, and releases the pending Idempotency-Key claims of servers gone (nothing was charged for
 * them). Safe on many servers at once. Returns what it removed.
 */
export async function sweepGoneServers(ctx: StoreContext): Promise<{ rows: number; claims: number }> {
  const { changes: rows } = await ctx.db.run(`DELETE FROM servers WHERE id <> ? AND ${longGone(ctx)}`, [ctx.owner]);
  const claims = await releaseClaimsOfGoneServers(ctx);
  return { rows, claims };
}

export interface ServerInfo { id: string; host: string; pid: number; startedAt: number; heartbeatAt: number; alive: boolean }

/** The servers that have a row (operators and tests). */
export async function listServers(ctx: StoreContext): Promise<ServerInfo[]> {
  const rows = await ctx.db.all<{ id: string; host: string; pid: number; started_at: number; heartbeat_at: number; alive: number }>(
    `SELECT id, host, pid, started_at, heartbeat_at, CASE WHEN heartbeat_at + lease_ms > ${sqlNow(ctx)} THEN 1 ELSE 0 END AS alive
       FROM servers ORDER BY started_at`,
  );
  return rows.map((r) => ({ id: r.id, host: r.host, pid: r.pid, startedAt: r.started_at, heartbeatAt: r.heartbeat_at, alive: Number(r.alive) === 1 }));
}

/**
 * This server in its fleet (store.fleet): its heartbeat, the servers seen, the secrets they share.
 *
 * `startHeartbeat` writes this server's heartbeat now and every third of `leaseMs` until `leave`
 * (which removes the row): other servers take its Idempotency-Key claims over once it is silent
 * for `leaseMs`. Every third beat (once a lease) also sweeps for servers gone (sweepGoneServers):
 * their old rows and their pending claims, on whichever server's timer comes first. A beat still
 * waiting for the store is not doubled; a beat that fails is told to the onHeartbeatFailure
 * listeners (metrics) and tried again at the next tick.
 */
export function fleetOf(ctx: StoreContext) {
  let timer: NodeJS.Timeout | null = null;
  const failureListeners = new Set<(err: unknown) => void>();
  return Object.freeze({
    async startHeartbeat(leaseMs: number): Promise<void> {
      await heartbeat(ctx, leaseMs);
      if (timer) return;
      let beats = 0;
      let beating = false;
      timer = setInterval(() => {
        if (beating) return;
        beating = true;
        const sweep = ++beats % 3 === 0;
        void (async () => {
          try {
            await heartbeat(ctx, leaseMs);
          } catch (err) {
            for (const listener of failureListeners) listener(err);
            return;
          }
          if (sweep) await sweepGoneServers(ctx).catch(() => undefined);
        })().finally(() => { beating = false; });
      }, Math.max(100, Math.floor(leaseMs / 3)));
      timer.unref();
    },
    /** Calls `listener` with the error of every heartbeat that fails (the store unreachable or too slow). */
    onHeartbeatFailure(listener: (err: unknown) => void): void { failureListeners.add(listener); },
    /** Stops the heartbeat and removes this server's row (a store's close). */
    async leave(): Promise<void> {
      if (!timer) return;
      clearInterval(timer);
      timer = null;
      await leave(ctx).catch(() => undefined);
    },
    list: boundTo(ctx, listServers),
    /** Old rows of dead servers, and the pending claims of servers gone. */
    sweepGone: boundTo(ctx, sweepGoneServers),
    /** A secret shared by every server on this store, generated by `generate` the first time (engine.ts SharedSecrets). */
    sharedSecret: (name: string, generate: () => string) => ctx.secrets(ctx.db, name, generate),
  });
}
export type FleetStore = ReturnType<typeof fleetOf>;
