/**
 * The rate limit's cost per request on PostgreSQL, before and after it became one statement
 * (issue 46), measured in one run of `npm run bench:fleet` on one database: statements per
 * request (counted at pg's Client), time per request from one client and checks per second from
 * many, and WAL bytes per request. "After" is the store's own `hitRateLimit`; "before" is a copy
 * of the code it replaced, kept here (and nowhere else) so that both run side by side, against a
 * table of the old shape of its own. Nothing here is used by cutout itself.
 */
import crypto from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { POSTGRES_NOW_MS } from '../dist/store/clock.js';
import { openStore, type RateDecision, type Store } from '../dist/store/db.js';

// ---- BEFORE: the rate limit as it was on main up to 2a08788 (src/store/rate-limit.ts), copied
// ---- verbatim but for the table's name. Three statements in one transaction, the log as JSON.

const BEFORE_TABLE = `CREATE TABLE rate_windows_before (
  rate_key   TEXT PRIMARY KEY,
  hits       TEXT NOT NULL,
  updated_at BIGINT NOT NULL
)`;

/** BEFORE: the decision for a window log after one more request at `now` was (or was not) counted. */
function decideBefore(log: number[], limit: number, windowMs: number, now: number): { decision: RateDecision; log: number[] } {
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

/** BEFORE: insert the row if missing, lock and read it, rewrite it when admitted; in one transaction. */
function hitBefore(store: Store, rateKey: string, limit: number, windowMs: number): Promise<RateDecision> {
  return store.db.transaction(async (tx) => {
    await tx.run(`INSERT INTO rate_windows_before (rate_key, hits, updated_at) VALUES (?, '[]', ${POSTGRES_NOW_MS}) ON CONFLICT (rate_key) DO NOTHING`, [rateKey]);
    const row = await tx.get<{ hits: string; now: number | string }>(`SELECT hits, ${POSTGRES_NOW_MS} AS now FROM rate_windows_before WHERE rate_key = ? FOR UPDATE`, [rateKey]);
    const now = Number(row?.now);
    const { decision, log } = decideBefore(JSON.parse(row?.hits ?? '[]') as number[], limit, windowMs, now);
    if (decision.allowed) await tx.run('UPDATE rate_windows_before SET hits = ?, updated_at = ? WHERE rate_key = ?', [JSON.stringify(log), now, rateKey]);
    return decision;
  });
}

// ---- END OF BEFORE.

type Hit = (store: Store, rateKey: string, limit: number, windowMs: number) => Promise<RateDecision>;
const IMPLEMENTATIONS: Record<'before' | 'after', Hit> = {
  before: hitBefore,
  after: (store, rateKey, limit, windowMs) => store.rateLimits.hit(rateKey, limit, windowMs),
};

/** Statements sent by every pg Client of this process, by first keyword: counted while the bench runs. */
function countStatements(): { counts: Record<string, number>; stop(): void } {
  const counts: Record<string, number> = {};
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text ?? '';
    const kind = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? 'OTHER';
    counts[kind] = (counts[kind] ?? 0) + 1;
    return original.apply(this, args);
  };
  return { counts, stop: () => { proto.query = original; } };
}

export interface RateLimitPhase { statementsPerRequest: number; byKind: Record<string, number>; meanMs: number; p50Ms: number; p99Ms: number; perSecond: number; walBytesPerRequest: number }
export interface RateLimitCost {
  checks: number; keys: number; limit: number; concurrency: number; rounds: number; loadAverage: number[];
  /** Medians over the rounds, per implementation and mode (one client, `concurrency` clients). */
  before: { serial: RateLimitPhase; concurrent: RateLimitPhase };
  after: { serial: RateLimitPhase; concurrent: RateLimitPhase };
}

const LIMIT = 60;
const WINDOW_MS = 60_000;

/** The same answers from both, on a key of each: 3 admitted, the 4th refused, at a limit of 3. */
async function checkSameAnswers(store: Store): Promise<void> {
  for (const [name, hit] of Object.entries(IMPLEMENTATIONS)) {
    const key = `check:${name}:${crypto.randomUUID()}`;
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const d = await hit(store, key, 3, WINDOW_MS);
      seen.push(`${d.allowed}/${d.remaining}`);
    }
    if (seen.join(' ') !== 'true/2 true/1 true/0 false/0') throw new Error(`rate limit ${name}: unexpected answers ${seen.join(' ')}`);
  }
}

async function walLsn(store: Store): Promise<number> {
  return Number((await store.db.get<{ wal: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS wal"))!.wal);
}

/** `checks` checks of `hit` from `concurrency` clients over `keys` fresh keys; times and counts. */
async function phase(store: Store, hit: Hit, checks: number, concurrency: number, keys: number): Promise<RateLimitPhase> {
  const prefix = crypto.randomUUID();
  const latencies: number[] = [];
  const walBefore = await walLsn(store);
  const counter = countStatements();
  let next = 0;
  const started = performance.now();
  try {
    await Promise.all(Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < checks; i = next++) {
        const t0 = performance.now();
        const d = await hit(store, `${prefix}:${i % keys}`, LIMIT, WINDOW_MS);
        latencies.push(performance.now() - t0);
        if (!d.allowed) throw new Error('the bench\'s keys must never be refused (a refusal costs less)');
      }
    }));
  } finally {
    counter.stop();
  }
  const elapsed = performance.now() - started;
  const walBytes = (await walLsn(store)) - walBefore;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]);
  const total = Object.values(counter.counts).reduce((a, b) => a + b, 0);
  return {
    statementsPerRequest: round(total / checks),
    byKind: Object.fromEntries(Object.entries(counter.counts).map(([k, v]) => [k, round(v / checks)])),
    meanMs: round(latencies.reduce((a, b) => a + b, 0) / checks), p50Ms: at(0.5), p99Ms: at(0.99),
    perSecond: Math.round(checks / (elapsed / 1000)),
    walBytesPerRequest: Math.round(walBytes / checks),
  };
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : round((s[s.length / 2 - 1] + s[s.length / 2]) / 2);
}

/** The phase whose mean time is the median of the rounds (a whole phase, so its figures agree). */
function medianPhase(list: RateLimitPhase[]): RateLimitPhase {
  const m = median(list.map((p) => p.meanMs));
  return list.reduce((best, p) => (Math.abs(p.meanMs - m) < Math.abs(best.meanMs - m) ? p : best));
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/**
 * Measures both implementations on the PostgreSQL database at `url` (migrated here), interleaved
 * round by round (before, after, after, before, ...) so that a machine's load falls on both.
 */
export async function measureRateLimitCost(url: string, dataDir: string, opts: { checks: number; concurrency: number; rounds: number; keys: number }): Promise<RateLimitCost> {
  const store = await openStore(dataDir, { url });
  try {
    await store.db.run(BEFORE_TABLE);
    await checkSameAnswers(store);
    // Warm-up, not measured: the pool's connections opened, both paths compiled.
    for (const hit of Object.values(IMPLEMENTATIONS)) await phase(store, hit, 200, opts.concurrency, opts.keys);
    const runs: Record<'before' | 'after', { serial: RateLimitPhase[]; concurrent: RateLimitPhase[] }> = {
      before: { serial: [], concurrent: [] }, after: { serial: [], concurrent: [] },
    };
    for (let r = 0; r < opts.rounds; r++) {
      const order: ('before' | 'after')[] = r % 2 ? ['after', 'before'] : ['before', 'after'];
      for (const name of order) {
        runs[name].serial.push(await phase(store, IMPLEMENTATIONS[name], opts.checks, 1, opts.keys));
        runs[name].concurrent.push(await phase(store, IMPLEMENTATIONS[name], opts.checks, opts.concurrency, opts.keys));
      }
    }
    const of = (name: 'before' | 'after') => ({ serial: medianPhase(runs[name].serial), concurrent: medianPhase(runs[name].concurrent) });
    return { ...opts, limit: LIMIT, loadAverage: os.loadavg().map(round), before: of('before'), after: of('after') };
  } finally {
    await store.close();
  }
}

/** The lines bench:fleet prints. */
export function formatRateLimitCost(c: RateLimitCost): string[] {
  const line = (name: string, p: { serial: RateLimitPhase; concurrent: RateLimitPhase }) =>
    `  ${name.padEnd(6)} ${p.serial.statementsPerRequest} statements/request ${JSON.stringify(p.serial.byKind)}; 1 client: mean ${p.serial.meanMs} ms, p50 ${p.serial.p50Ms} ms, p99 ${p.serial.p99Ms} ms; ` +
    `${c.concurrency} clients: ${p.concurrent.perSecond} checks/s (p50 ${p.concurrent.p50Ms} ms, p99 ${p.concurrent.p99Ms} ms); WAL ${p.serial.walBytesPerRequest} bytes/request`;
  return [
    `rate limit per request on PostgreSQL: ${c.checks} checks per phase over ${c.keys} keys at ${c.limit}/min (never refused), medians of ${c.rounds} interleaved rounds; load average ${c.loadAverage.join(' ')}`,
    line('before', c.before),
    line('after', c.after),
    `  after/before: time per request (1 client) ${round(c.after.serial.meanMs / c.before.serial.meanMs)}, checks per second (${c.concurrency} clients) ${round(c.after.concurrent.perSecond / c.before.concurrent.perSecond)}, statements ${round(c.after.serial.statementsPerRequest / c.before.serial.statementsPerRequest)}`,
  ];
}
