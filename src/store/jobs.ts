/**
 * The durable job queue and its callback deliveries, in the same SQLite file as the ledger.
 *
 * A job goes queued -> processing -> done | failed. Claiming takes the oldest queued job, sets a
 * lease and bumps `attempts`; the attempt number is the claim's token: every later write about
 * that run (lease renewal, done, failed) names it, so a run that lost its claim (requeued by a
 * stop or a crash recovery) can never finish the job a second time.
 *
 * The input bytes of an uploaded or base64 job live in `<dataDir>/jobs/<id>.input`, written (and
 * fsynced) before the row, so a job accepted with 202 can run after a restart. An `image_url`
 * job keeps only its URL and fetches it when it runs.
 *
 * A callback delivery row is written in the same transaction as the job's final state, so a
 * finished job with a callback URL always has a delivery to make, restart or not.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ImageOptions } from '../options.js';
import type { StoreContext } from './ledger.js';
import type { Queryable } from './sqlite.js';

export type JobStatus = 'queued' | 'processing' | 'done' | 'failed';
export type JobSourceKind = 'image_file' | 'image_file_b64' | 'image_url';

export interface JobError { code: string; message: string }

export interface NewJob {
  /** UUID v4: the job_id, and the id of its run and result. */
  id: string;
  accountId: string;
  keyId: string | null;
  options: ImageOptions;
  sourceKind: JobSourceKind;
  /** For image_url jobs. */
  sourceUrl: string | null;
  /** For uploaded and base64 jobs: the file written by writeJobInput. */
  inputPath: string | null;
  /** Description of the input for the run record ("upload", "url example.com"). */
  inputDesc: string;
  callbackUrl: string | null;
  /** False for test keys and marketplace callers: the job is never charged. */
  billable: boolean;
  batchId: string | null;
}

/** A stored job: what was submitted, and its state since. */
export interface JobRow extends NewJob {
  status: JobStatus;
  error: JobError | null;
  creditsCharged: number | null;
  creditsRemaining: number | null;
  leaseUntil: number | null;
  /** Claims so far; the current claim's token. */
  attempts: number;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
}

interface RawJob {
  id: string; account_id: string; key_id: string | null; status: JobStatus; params: string; input_path: string | null;
  callback_url: string | null; error: string | null; credits_charged: number | null; credits_remaining: number | null;
  lease_until: number | null; attempts: number; created_at: number; updated_at: number; finished_at: number | null;
  source_kind: JobSourceKind | null; source_url: string | null; input_desc: string | null; billable: number; batch_id: string | null;
}

function toJob(r: RawJob): JobRow {
  return {
    id: r.id, accountId: r.account_id, keyId: r.key_id, status: r.status, options: JSON.parse(r.params) as ImageOptions,
    sourceKind: r.source_kind ?? 'image_file', sourceUrl: r.source_url, inputPath: r.input_path, inputDesc: r.input_desc ?? 'job',
    callbackUrl: r.callback_url, billable: r.billable === 1, batchId: r.batch_id,
    error: r.error === null ? null : (JSON.parse(r.error) as JobError),
    creditsCharged: r.credits_charged, creditsRemaining: r.credits_remaining, leaseUntil: r.lease_until, attempts: r.attempts,
    createdAt: r.created_at, updatedAt: r.updated_at, finishedAt: r.finished_at,
  };
}

// ---------------------------------------------------------------------------------------------
// Input files
// ---------------------------------------------------------------------------------------------

export function jobInputsDir(dataDir: string): string {
  return path.join(dataDir, 'jobs');
}

/** Writes a job's input durably (temp file, fsync, rename) and returns its absolute path. */
export async function writeJobInput(ctx: StoreContext, jobId: string, data: Buffer): Promise<string> {
  const dir = jobInputsDir(ctx.dataDir);
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(dir, `${jobId}.input`);
  const tmp = `${file}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  const handle = await fs.open(tmp, 'w', 0o600);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await fs.rename(tmp, file);
  return file;
}

export async function removeJobInput(file: string | null): Promise<void> {
  if (file) await fs.rm(file, { force: true }).catch(() => undefined);
}

/** Deletes input files that no queued or processing job needs (left by a crash or a refused submission). */
export async function removeOrphanJobInputs(ctx: StoreContext): Promise<number> {
  const dir = jobInputsDir(ctx.dataDir);
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  if (names.length === 0) return 0;
  const rows = await ctx.db.all<{ input_path: string }>("SELECT input_path FROM jobs WHERE status IN ('queued', 'processing') AND input_path IS NOT NULL");
  const needed = new Set(rows.map((r) => r.input_path));
  let removed = 0;
  for (const name of names) {
    const file = path.join(dir, name);
    if (needed.has(file)) continue;
    // A file being written right now for a submission in flight is young: leave it.
    const stat = await fs.stat(file).catch(() => null);
    if (!stat || ctx.now() - stat.mtimeMs < 60_000) continue;
    await fs.rm(file, { force: true }).catch(() => undefined);
    removed++;
  }
  return removed;
}

// ---------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------

/**
 * Inserts jobs in one transaction, all or none, unless the queue would then hold more than
 * `queueLimit` queued jobs: then nothing is written and `queued` says how many wait.
 */
/** Inserts the jobs as queued, all or none; `within` commits or rolls back with them. */
export async function createJobs(
  ctx: StoreContext,
  jobs: NewJob[],
  queueLimit: number,
  within?: (tx: Queryable) => Promise<void>,
): Promise<{ created: boolean; queued: number }> {
  return ctx.db.transaction(async (tx) => {
    const queued = await countStatus(tx, 'queued');
    if (queued + jobs.length > queueLimit) return { created: false, queued };
    const now = ctx.now();
    for (const j of jobs) {
      await tx.run(
        `INSERT INTO jobs (id, account_id, key_id, status, params, input_path, callback_url, attempts, created_at, updated_at,
                           source_kind, source_url, input_desc, billable, batch_id)
         VALUES (?, ?, ?, 'queued', ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?)`,
        [j.id, j.accountId, j.keyId, JSON.stringify(j.options), j.inputPath, j.callbackUrl, now, now,
          j.sourceKind, j.sourceUrl, j.inputDesc, j.billable ? 1 : 0, j.batchId],
      );
    }
    if (within) await within(tx);
    return { created: true, queued: queued + jobs.length };
  });
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

/** Claims the oldest queued job (FIFO, batch items in order): processing, leased, attempts + 1. */
export async function claimNextJob(ctx: StoreContext, leaseMs: number): Promise<JobRow | null> {
  return ctx.db.transaction(async (tx) => {
    const row = await tx.get<RawJob>("SELECT * FROM jobs WHERE status = 'queued' ORDER BY created_at, rowid LIMIT 1");
    if (!row) return null;
    const now = ctx.now();
    await tx.run("UPDATE jobs SET status = 'processing', lease_until = ?, attempts = attempts + 1, updated_at = ? WHERE id = ?", [
      now + leaseMs, now, row.id,
    ]);
    return toJob({ ...row, status: 'processing', lease_until: now + leaseMs, attempts: row.attempts + 1, updated_at: now });
  });
}

/** Extends the lease of a claim; false when the claim was lost. */
export async function renewJobLease(ctx: StoreContext, id: string, attempt: number, leaseMs: number): Promise<boolean> {
  const { changes } = await ctx.db.run("UPDATE jobs SET lease_until = ? WHERE id = ? AND status = 'processing' AND attempts = ?", [
    ctx.now() + leaseMs, id, attempt,
  ]);
  return changes === 1;
}

function insertDeliveryIn(tx: Queryable, jobId: string, url: string, body: string, now: number) {
  return tx.run('INSERT INTO callback_deliveries (job_id, url, body, attempts, next_attempt_at, created_at) VALUES (?, ?, ?, 0, ?, ?)', [
    jobId, url, body, now, now,
  ]);
}

/**
 * Marks a claimed job done inside the caller's transaction (the one of recordRun), with its
 * callback delivery when it has a callback URL. False when the claim was lost: the caller must
 * then throw so the charge rolls back.
 */
export async function markJobDoneIn(
  ctx: StoreContext, tx: Queryable, id: string, attempt: number,
  done: { creditsCharged: number; creditsRemaining: number | null }, callback: { url: string; body: string } | null,
): Promise<boolean> {
  const now = ctx.now();
  const { changes } = await tx.run(
    `UPDATE jobs SET status = 'done', credits_charged = ?, credits_remaining = ?, lease_until = NULL, updated_at = ?, finished_at = ?
      WHERE id = ? AND status = 'processing' AND attempts = ?`,
    [done.creditsCharged, done.creditsRemaining, now, now, id, attempt],
  );
  if (changes !== 1) return false;
  if (callback) await insertDeliveryIn(tx, id, callback.url, callback.body, now);
  return true;
}

/** Marks a claimed job failed (nothing charged) with its callback delivery; false when the claim was lost. */
export async function failJob(ctx: StoreContext, id: string, attempt: number, error: JobError, callback: { url: string; body: string } | null): Promise<boolean> {
  return ctx.db.transaction(async (tx) => {
    const now = ctx.now();
    const { changes } = await tx.run(
      `UPDATE jobs SET status = 'failed', error = ?, lease_until = NULL, updated_at = ?, finished_at = ?
        WHERE id = ? AND status = 'processing' AND attempts = ?`,
      [JSON.stringify(error), now, now, id, attempt],
    );
    if (changes !== 1) return false;
    if (callback) await insertDeliveryIn(tx, id, callback.url, callback.body, now);
    return true;
  });
}

/** Puts claimed jobs back in the queue (a stop past its grace period). Only claims still held move. */
export async function requeueJobs(ctx: StoreContext, claims: { id: string; attempt: number }[]): Promise<number> {
  if (claims.length === 0) return 0;
  return ctx.db.transaction(async (tx) => {
    let moved = 0;
    for (const c of claims) {
      const { changes } = await tx.run(
        "UPDATE jobs SET status = 'queued', lease_until = NULL, updated_at = ? WHERE id = ? AND status = 'processing' AND attempts = ?",
        [ctx.now(), c.id, c.attempt],
      );
      moved += changes;
    }
    return moved;
  });
}

/**
 * At start: every job a previous process left `processing` goes back to `queued`, unless it has
 * been claimed `maxAttempts` times already (it may be what crashes the server): those stay
 * `processing` and are returned, for the caller to fail.
 */
export async function recoverJobs(ctx: StoreContext, maxAttempts: number): Promise<{ requeued: number; exhausted: JobRow[] }> {
  return ctx.db.transaction(async (tx) => {
    const exhausted = await tx.all<RawJob>("SELECT * FROM jobs WHERE status = 'processing' AND attempts >= ?", [maxAttempts]);
    const { changes } = await tx.run(
      "UPDATE jobs SET status = 'queued', lease_until = NULL, updated_at = ? WHERE status = 'processing' AND attempts < ?",
      [ctx.now(), maxAttempts],
    );
    return { requeued: changes, exhausted: exhausted.map(toJob) };
  });
}

/**
 * Requeues processing jobs whose lease ran out and that this process is not running (a process
 * that died while another one shares the data directory). Returns how many moved.
 */
export async function requeueExpiredLeases(ctx: StoreContext, runningHere: string[]): Promise<number> {
  const now = ctx.now();
  const expired = await ctx.db.all<{ id: string; attempts: number }>(
    "SELECT id, attempts FROM jobs WHERE status = 'processing' AND lease_until IS NOT NULL AND lease_until < ?", [now],
  );
  const mine = new Set(runningHere);
  return requeueJobs(ctx, expired.filter((j) => !mine.has(j.id)).map((j) => ({ id: j.id, attempt: j.attempts })));
}

/** A job of an account; null when unknown, another account's, or purged. */
export async function getJob(ctx: StoreContext, id: string, accountId: string): Promise<JobRow | null> {
  const row = await ctx.db.get<RawJob>('SELECT * FROM jobs WHERE id = ? AND account_id = ?', [id, accountId]);
  return row ? toJob(row) : null;
}

/** Any job by id (operators and tests). */
export async function getJobById(ctx: StoreContext, id: string): Promise<JobRow | null> {
  const row = await ctx.db.get<RawJob>('SELECT * FROM jobs WHERE id = ?', [id]);
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

// ---------------------------------------------------------------------------------------------
// Callback deliveries
// ---------------------------------------------------------------------------------------------

export interface Delivery {
  id: number;
  jobId: string;
  url: string;
  /** The exact text signed and sent. */
  body: string;
  /** Attempts made so far. */
  attempts: number;
  nextAttemptAt: number;
}

/** Pending deliveries due at `now`, oldest first. */
export async function dueDeliveries(ctx: StoreContext, limit: number): Promise<Delivery[]> {
  const rows = await ctx.db.all<{ id: number; job_id: string; url: string; body: string; attempts: number; next_attempt_at: number }>(
    `SELECT id, job_id, url, body, attempts, next_attempt_at FROM callback_deliveries
      WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`,
    [ctx.now(), limit],
  );
  return rows.map((r) => ({ id: r.id, jobId: r.job_id, url: r.url, body: r.body, attempts: r.attempts, nextAttemptAt: r.next_attempt_at }));
}

/** When the next pending delivery is due (ms since the epoch), or null when none is pending. */
export async function nextDeliveryAt(ctx: StoreContext): Promise<number | null> {
  const row = await ctx.db.get<{ at: number | null }>(
    'SELECT MIN(next_attempt_at) AS at FROM callback_deliveries WHERE delivered_at IS NULL AND gave_up_at IS NULL',
  );
  return row?.at ?? null;
}

export type DeliveryUpdate =
  | { state: 'delivered'; attempts: number }
  | { state: 'retry'; attempts: number; nextAttemptAt: number; lastError: string }
  | { state: 'gave_up'; attempts: number; lastError: string };

/** Records the outcome of one attempt. */
export async function recordDeliveryAttempt(ctx: StoreContext, id: number, update: DeliveryUpdate): Promise<void> {
  const now = ctx.now();
  if (update.state === 'delivered') {
    await ctx.db.run('UPDATE callback_deliveries SET attempts = ?, delivered_at = ?, last_error = NULL WHERE id = ?', [update.attempts, now, id]);
  } else if (update.state === 'retry') {
    await ctx.db.run('UPDATE callback_deliveries SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE id = ?', [
      update.attempts, update.nextAttemptAt, update.lastError, id,
    ]);
  } else {
    await ctx.db.run('UPDATE callback_deliveries SET attempts = ?, gave_up_at = ?, last_error = ? WHERE id = ?', [update.attempts, now, update.lastError, id]);
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
