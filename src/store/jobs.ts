/**
 * The durable job queue, in the same database as the ledger.
 *
 * A job goes queued -> processing -> done | failed. Claiming takes the oldest queued job (FOR
 * UPDATE SKIP LOCKED on PostgreSQL, so servers claiming at once take different jobs), sets a
 * lease owned by this server's identity and bumps `attempts`; the attempt number is the claim's
 * token: every later write about that run (lease renewal, done, failed, hand-back) names the
 * owner and the attempt, so a run that lost its claim (its lease ran out and another server took
 * the job) can never finish the job a second time.
 *
 * The input bytes of an uploaded or base64 job are stored with it (a file in the data directory
 * for SQLite, a BYTEA row for PostgreSQL, see engine.ts), so a job accepted with 202 runs after a
 * restart, on any server. An `image_url` job keeps only its URL and fetches it when it runs.
 *
 * A callback delivery row (deliveries.ts) is written in the same transaction as the job's final
 * state, so a finished job with a callback URL always has a delivery to make.
 */
import { parseResultFields, storedResultFields, type ResultFields } from '../result-fields.js';
import type { ImageOptions } from '../options.js';
import { sqlNow } from './clock.js';
import type { Staged } from './engine.js';
import { insertDeliveryIn } from './deliveries.js';
import { boundTo, type StoreContext } from './context.js';
import type { Queryable } from './sql.js';

export type JobStatus = 'queued' | 'processing' | 'done' | 'failed';
export type JobSourceKind = 'image_file' | 'image_file_b64' | 'image_url';

export interface JobError { code: string; message: string }

/** A finished job's callback, written with its final state: the URL, the exact body, and the traceparent of the job's run (null: untraced). */
export interface JobCallback { url: string; body: string; traceparent?: string | null }

interface JobFields {
  /** UUID v4: the job_id, and the id of its run and result. */
  id: string;
  accountId: string;
  keyId: string | null;
  options: ImageOptions;
  sourceKind: JobSourceKind;
  /** For image_url jobs. */
  sourceUrl: string | null;
  /** Description of the input for the run record ("upload", "url example.com"). */
  inputDesc: string;
  callbackUrl: string | null;
  /** False for test keys and marketplace callers: the job is never charged. */
  billable: boolean;
  batchId: string | null;
  /**
   * The W3C traceparent of the request that created the job (src/telemetry/): its run joins that
   * request's trace, on whichever server claims it. Null when tracing was off.
   */
  traceparent?: string | null;
}

export interface NewJob extends JobFields {
  /** For uploaded and base64 jobs: the image bytes, stored with the job. */
  input: Buffer | null;
}

/** A stored job: what was submitted, and its state since. */
export interface JobRow extends JobFields {
  status: JobStatus;
  error: JobError | null;
  creditsCharged: number | null;
  creditsRemaining: number | null;
  leaseUntil: number | null;
  /** The server identity holding the current claim. */
  leaseOwner: string | null;
  /** Claims so far; the current claim's token. */
  attempts: number;
  /** Claims of those handed back because inference was unavailable (requeueAfterOutage): not crashes. */
  outages: number;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  /** What a done job's result says of itself (result-fields.ts); null before it is done, and for jobs done before it was kept. */
  resultFields: Partial<ResultFields> | null;
}

interface RawJob {
  id: string; account_id: string; key_id: string | null; status: JobStatus; params: string;
  callback_url: string | null; error: string | null; credits_charged: number | null; credits_remaining: number | null;
  lease_until: number | null; lease_owner: string | null; attempts: number; outages: number; created_at: number; updated_at: number; finished_at: number | null;
  source_kind: JobSourceKind | null; source_url: string | null; input_desc: string | null; billable: number; batch_id: string | null;
  result_fields: string | null;
  traceparent: string | null;
}

const JOB_COLUMNS = `id, account_id, key_id, status, params, callback_url, error, credits_charged, credits_remaining, lease_until, lease_owner,
  attempts, outages, created_at, updated_at, finished_at, source_kind, source_url, input_desc, billable, batch_id, result_fields, traceparent`;

/**
 * The version of a job's stored `params` (its ImageOptions as JSON, with `v`). 1: before `v` was
 * written (size, format, bgColor, crop, type, quality, precision); 2: the same fields plus mask,
 * alpha, refine and decontaminate. A change to the meaning of a stored field bumps it, and
 * `readJobParams` upgrades older rows, so a job queued by an older server runs as it was asked.
 * The fields stay at the top level: an older server of a fleet reads a newer row as before.
 */
export const JOB_PARAMS_VERSION = 2;

export function writeJobParams(options: ImageOptions): string {
  return JSON.stringify({ ...options, v: JOB_PARAMS_VERSION });
}

export function readJobParams(text: string): ImageOptions {
  const { v: _version, ...options } = JSON.parse(text) as ImageOptions & { v?: number };
  // Versions 1 and 2 read alike: version 1 lacks only the fields that default when absent. (A
  // newer row on an older server of a fleet mid-upgrade is read as is, its new fields unknown.)
  return options;
}

function toJob(r: RawJob): JobRow {
  return {
    id: r.id, accountId: r.account_id, keyId: r.key_id, status: r.status, options: readJobParams(r.params),
    sourceKind: r.source_kind ?? 'image_file', sourceUrl: r.source_url, inputDesc: r.input_desc ?? 'job',
    callbackUrl: r.callback_url, billable: r.billable === 1, batchId: r.batch_id,
    error: r.error === null ? null : (JSON.parse(r.error) as JobError),
    creditsCharged: r.credits_charged, creditsRemaining: r.credits_remaining, leaseUntil: r.lease_until, leaseOwner: r.lease_owner,
    attempts: r.attempts, outages: r.outages, createdAt: r.created_at, updatedAt: r.updated_at, finishedAt: r.finished_at,
    resultFields: parseResultFields(r.result_fields),
    traceparent: r.traceparent,
  };
}

/**
 * Inserts the jobs as queued with their inputs, in one transaction, all or none, unless the queue
 * would then hold more than `queueLimit` queued jobs: then nothing is written and `queued` says
 * how many wait. `within` commits or rolls back with them.
 */
export async function createJobs(
  ctx: StoreContext,
  jobs: NewJob[],
  queueLimit: number,
  within?: (tx: Queryable) => Promise<void>,
): Promise<{ created: boolean; queued: number }> {
  const staged = new Map<string, Staged>();
  try {
    for (const j of jobs) if (j.input) staged.set(j.id, await ctx.inputs.stage(j.id, j.input));
    const outcome = await ctx.db.transaction(async (tx) => {
      const queued = await countStatus(tx, 'queued');
      if (queued + jobs.length > queueLimit) return { created: false, queued };
      const now = ctx.now();
      for (const j of jobs) {
        await tx.run(
          `INSERT INTO jobs (id, account_id, key_id, status, params, callback_url, attempts, created_at, updated_at,
                             source_kind, source_url, input_desc, billable, batch_id, traceparent)
           VALUES (?, ?, ?, 'queued', ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [j.id, j.accountId, j.keyId, writeJobParams(j.options), j.callbackUrl, now, now,
            j.sourceKind, j.sourceUrl, j.inputDesc, j.billable ? 1 : 0, j.batchId, j.traceparent ?? null],
        );
        const input = staged.get(j.id);
        if (input) await ctx.inputs.insert(tx, j.id, input);
      }
      if (within) await within(tx);
      return { created: true, queued: queued + jobs.length };
    });
    if (!outcome.created) await Promise.all([...staged.values()].map((s) => ctx.inputs.discard(s)));
    else await ctx.db.notify(JOBS_QUEUED_CHANNEL);
    return outcome;
  } catch (err) {
    await Promise.all([...staged.values()].map((s) => ctx.inputs.discard(s)));
    throw err;
  }
}

async function countStatus(q: Queryable, status: JobStatus): Promise<number> {
  const row = await q.get<{ n: number }>('SELECT COUNT(*) AS n FROM jobs WHERE status = ?', [status]);
  return row?.n ?? 0;
}

export async function jobCounts(ctx: StoreContext): Promise<{ queued: number; processing: number }> {
  const rows = await ctx.db.all<{ status: JobStatus; n: number }>(
    "SELECT status, COUNT(*) AS n FROM jobs WHERE status IN ('queued', 'processing') GROUP BY status",
  );
  const out = { queued: 0, processing: 0 };
  for (const r of rows) out[r.status as 'queued' | 'processing'] = r.n;
  return out;
}

/** Claims the oldest queued job (FIFO, batch items in order) for this server: processing, leased, attempts + 1. */
export async function claimNextJob(ctx: StoreContext, leaseMs: number): Promise<JobRow | null> {
  return ctx.db.transaction(async (tx) => {
    const row = await tx.get<RawJob>(`SELECT ${JOB_COLUMNS} FROM jobs WHERE status = 'queued' ORDER BY created_at, rowid LIMIT 1${tx.dialect.skipLocked}`);
    if (!row) return null;
    const now = ctx.now();
    // The lease ends by the store's clock (clock.ts), read back as written.
    await tx.run(`UPDATE jobs SET status = 'processing', lease_until = ${sqlNow(ctx, tx)} + ?, lease_owner = ?, attempts = attempts + 1, updated_at = ? WHERE id = ?`, [
      leaseMs, ctx.owner, now, row.id,
    ]);
    const lease = await tx.get<{ lease_until: number }>('SELECT lease_until FROM jobs WHERE id = ?', [row.id]);
    return toJob({ ...row, status: 'processing', lease_until: lease?.lease_until ?? null, lease_owner: ctx.owner, attempts: row.attempts + 1, updated_at: now });
  });
}

/** The claim guard: still processing, still ours, same attempt. */
const HELD = "status = 'processing' AND lease_owner = ? AND attempts = ?";

/** Extends the lease of a claim; false when the claim was lost. */
export async function renewJobLease(ctx: StoreContext, id: string, attempt: number, leaseMs: number): Promise<boolean> {
  const { changes } = await ctx.db.run(`UPDATE jobs SET lease_until = ${sqlNow(ctx)} + ? WHERE id = ? AND ${HELD}`, [leaseMs, id, ctx.owner, attempt]);
  return changes === 1;
}

/**
 * Marks a claimed job done inside the caller's transaction (the one of recordRun, which holds the
 * charge), with its callback delivery when it has a callback URL. False when the claim was lost:
 * the caller must then throw so the charge rolls back.
 */
export async function markJobDoneIn(
  ctx: StoreContext, tx: Queryable, id: string, attempt: number,
  done: { creditsCharged: number; creditsRemaining: number | null; fields?: Partial<ResultFields> }, callback: JobCallback | null,
): Promise<boolean> {
  const now = ctx.now();
  const { changes } = await tx.run(
    `UPDATE jobs SET status = 'done', credits_charged = ?, credits_remaining = ?, result_fields = ?, lease_until = NULL, updated_at = ?, finished_at = ?
      WHERE id = ? AND ${HELD}`,
    [done.creditsCharged, done.creditsRemaining, storedResultFields(done.fields), now, now, id, ctx.owner, attempt],
  );
  if (changes !== 1) return false;
  if (callback) await insertDeliveryIn(tx, id, callback, now);
  return true;
}

/** Marks a claimed job failed (nothing charged) with its callback delivery; false when the claim was lost. */
export async function failJob(ctx: StoreContext, id: string, attempt: number, error: JobError, callback: JobCallback | null): Promise<boolean> {
  return ctx.db.transaction(async (tx) => {
    const now = ctx.now();
    const { changes } = await tx.run(
      `UPDATE jobs SET status = 'failed', error = ?, lease_until = NULL, updated_at = ?, finished_at = ? WHERE id = ? AND ${HELD}`,
      [JSON.stringify(error), now, now, id, ctx.owner, attempt],
    );
    if (changes !== 1) return false;
    if (callback) await insertDeliveryIn(tx, id, callback, now);
    return true;
  });
}

/**
 * The channel on which a store tells every server of the fleet that jobs were queued (created, or
 * handed back), so an idle server claims them at once rather than at its next sweep.
 */
export const JOBS_QUEUED_CHANNEL = 'cutout_jobs_queued';

/** Hands this server's claims back to the queue (a stop past its grace period). Only claims still held move. */
export async function requeueJobs(ctx: StoreContext, claims: { id: string; attempt: number }[]): Promise<number> {
  if (claims.length === 0) return 0;
  const moved = await ctx.db.transaction(async (tx) => {
    let moved = 0;
    for (const c of claims) {
      const { changes } = await tx.run(
        `UPDATE jobs SET status = 'queued', lease_until = NULL, lease_owner = NULL, updated_at = ? WHERE id = ? AND ${HELD}`,
        [ctx.now(), c.id, ctx.owner, c.attempt],
      );
      moved += changes;
    }
    return moved;
  });
  if (moved > 0) await ctx.db.notify(JOBS_QUEUED_CHANNEL);
  return moved;
}

/**
 * Hands a claim back to the queue because inference was unavailable (an upstream down, timing out
 * or failing with 5xx). Unlike requeueJobs, the claim is also counted in `outages`, so outages
 * never count towards the attempts after which an interrupted job is failed. False when the
 * claim was lost.
 */
export async function requeueAfterOutage(ctx: StoreContext, claim: { id: string; attempt: number }): Promise<boolean> {
  const { changes } = await ctx.db.run(
    `UPDATE jobs SET status = 'queued', lease_until = NULL, lease_owner = NULL, outages = outages + 1, updated_at = ? WHERE id = ? AND ${HELD}`,
    [ctx.now(), claim.id, ctx.owner, claim.attempt],
  );
  return changes === 1;
}

/**
 * Takes back the claims of servers that are gone: processing jobs whose lease ran out, or whose
 * owner is known to have stopped (a dead pid on this host, for SQLite). They go back to
 * `queued` (their attempt stays counted), unless they have been claimed `maxAttempts` times
 * already (the job may be what kills servers): those are returned for the caller to fail.
 * `runningHere`: jobs this process runs, never taken from itself. Safe on many servers at once:
 * each move is guarded by the owner and the attempt it saw.
 */
export async function reclaimAbandonedJobs(ctx: StoreContext, maxAttempts: number, runningHere: string[] = []): Promise<{ requeued: number; exhausted: JobRow[] }> {
  const now = ctx.now();
  // Whether a lease ran out is the store's clock's to say (clock.ts), never this server's.
  const expiredSql = `(lease_until IS NULL OR lease_until < ${sqlNow(ctx)})`;
  const processing = await ctx.db.all<RawJob & { expired: number | boolean }>(
    `SELECT ${JOB_COLUMNS}, CASE WHEN ${expiredSql} THEN 1 ELSE 0 END AS expired FROM jobs WHERE status = 'processing'${ctx.liveness.knowsDeathBeforeLease ? '' : ` AND ${expiredSql}`}`,
  );
  const mine = new Set(runningHere);
  let requeued = 0;
  const exhausted: JobRow[] = [];
  for (const { expired: expiredFlag, ...row } of processing) {
    if (mine.has(row.id)) continue;
    const expired = Number(expiredFlag) === 1;
    if (!expired && (!ctx.liveness.knowsDeathBeforeLease || (await ctx.liveness.ownerAlive(ctx.db, row.lease_owner, null, ctx.owner)))) continue;
    // Outages are not interruptions: a job that waited out many upstream outages is not failed for them.
    if (row.attempts - row.outages >= maxAttempts) {
      exhausted.push(toJob(row));
      continue;
    }
    const { changes } = await ctx.db.run(
      `UPDATE jobs SET status = 'queued', lease_until = NULL, lease_owner = NULL, updated_at = ?
        WHERE id = ? AND status = 'processing' AND lease_owner IS NOT DISTINCT FROM ? AND attempts = ? AND lease_until IS NOT DISTINCT FROM ?`,
      [now, row.id, row.lease_owner, row.attempts, row.lease_until],
    );
    requeued += changes;
  }
  if (requeued > 0) await ctx.db.notify(JOBS_QUEUED_CHANNEL);
  return { requeued, exhausted };
}

/**
 * Takes an abandoned job over in order to fail it (it was interrupted `maxAttempts` times): the
 * claim moves to this server (same attempt), so failJob's guard then holds. False when another
 * server got there first.
 */
export async function adoptAbandonedJob(ctx: StoreContext, job: JobRow, leaseMs: number): Promise<boolean> {
  // Guarded by the lease seen too: the adoption changes it, so of two adopters only one matches.
  const { changes } = await ctx.db.run(
    `UPDATE jobs SET lease_owner = ?, lease_until = ${sqlNow(ctx)} + ? WHERE id = ? AND status = 'processing'
        AND lease_owner IS NOT DISTINCT FROM ? AND attempts = ? AND lease_until IS NOT DISTINCT FROM ?`,
    [ctx.owner, leaseMs, job.id, job.leaseOwner, job.attempts, job.leaseUntil],
  );
  return changes === 1;
}

/** A job of an account; null when unknown, another account's, or purged. */
export async function getJob(ctx: StoreContext, id: string, accountId: string): Promise<JobRow | null> {
  const row = await ctx.db.get<RawJob>(`SELECT ${JOB_COLUMNS} FROM jobs WHERE id = ? AND account_id = ?`, [id, accountId]);
  return row ? toJob(row) : null;
}

/** Any job by id (operators and tests). */
export async function getJobById(ctx: StoreContext, id: string): Promise<JobRow | null> {
  const row = await ctx.db.get<RawJob>(`SELECT ${JOB_COLUMNS} FROM jobs WHERE id = ?`, [id]);
  return row ? toJob(row) : null;
}

/**
 * Deletes finished jobs older than `ttlSeconds` whose callbacks are no longer pending (their
 * delivery rows go with them). Returns how many went.
 */
export async function purgeJobs(ctx: StoreContext, ttlSeconds: number): Promise<number> {
  const { changes } = await ctx.db.run(
    `DELETE FROM jobs WHERE status IN ('done', 'failed') AND finished_at <= ?
        AND NOT EXISTS (SELECT 1 FROM callback_deliveries d WHERE d.job_id = jobs.id AND d.delivered_at IS NULL AND d.gave_up_at IS NULL)`,
    [ctx.now() - ttlSeconds * 1000],
  );
  return changes;
}

/** Jobs, their inputs and their leases (store.jobs). */
export function jobsOf(ctx: StoreContext) {
  return Object.freeze({
    create: boundTo(ctx, createJobs),
    readInput: (jobId: string) => ctx.inputs.read(ctx.db, jobId),
    removeInput: (jobId: string) => ctx.inputs.remove(ctx.db, jobId),
    removeOrphanInputs: () => ctx.inputs.removeOrphans(ctx.db, ctx.now()),
    counts: boundTo(ctx, jobCounts),
    claimNext: boundTo(ctx, claimNextJob),
    renewLease: boundTo(ctx, renewJobLease),
    markDoneIn: boundTo(ctx, markJobDoneIn),
    fail: boundTo(ctx, failJob),
    requeue: boundTo(ctx, requeueJobs),
    requeueAfterOutage: boundTo(ctx, requeueAfterOutage),
    reclaimAbandoned: boundTo(ctx, reclaimAbandonedJobs),
    adoptAbandoned: boundTo(ctx, adoptAbandonedJob),
    get: boundTo(ctx, getJob),
    getById: boundTo(ctx, getJobById),
    purge: boundTo(ctx, purgeJobs),
    /**
     * Calls `onQueued` when jobs are queued anywhere in the fleet (PostgreSQL's LISTEN/NOTIFY), so
     * an idle server claims them at once; with SQLite, never (one host: the sweep finds them).
     */
    onQueued: (onQueued: () => void): Promise<void> => ctx.db.listen(JOBS_QUEUED_CHANNEL, onQueued),
  });
}
export type JobStore = ReturnType<typeof jobsOf>;
