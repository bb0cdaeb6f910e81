/**
 * The store: one SQLite file `<dataDir>/cutout.db` (WAL) plus `<dataDir>/results/`.
 *
 *   const store = await openStore(dataDir)            // creates the dir, migrates; `await store.close()` at the end
 *   store.createKey({ name?, test?, accountId? })     -> { id, key, account, credits }   (new account: 10 free credits)
 *   store.listKeys() -> KeyInfo[]      store.revokeKey(id) -> boolean      store.authenticate(rawKey) -> { accountId, keyId, test } | null
 *   store.addCredits(accountOrKeyId, n) -> { accountId, balance }          store.balance(accountId) -> number
 *   store.resolveAccount(accountOrKeyId) -> accountId  (throws invalid_request when unknown)
 *   store.recordRun({ id, accountId|null, keyId|null, channel: 'cli'|'api'|'job', input, size, credits: 0|1, ms, result? })
 *        -> { creditsCharged, creditsRemaining|null }  charge + run + result row in ONE transaction; insufficient_credits at 0
 *   store.account(accountId|null) -> { accountId, balance, plan, creditsUsedThisMonth, requestsThisMonth, test }  (null: local runs)
 *   store.usage(accountId|null) -> [{ date: 'YYYY-MM-DD', credits, requests }] x30, newest first (UTC days)
 *        (optional second argument { within(tx, outcome) }: more writes in the same transaction, e.g. a job's final state)
 *   store.writeResultFile(id, ext, data) -> path; store.getResult(id, ttlS); store.purgeResults(ttlS); idempotency: claim/complete/release
 *   jobs (src/store/jobs.ts): writeJobInput, createJobs, claimNextJob, renewJobLease, markJobDoneIn, failJob, requeueJobs,
 *        recoverJobs, requeueExpiredLeases, getJob, jobCounts, purgeJobs; callback deliveries: dueDeliveries, nextDeliveryAt,
 *        recordDeliveryAttempt, deliveriesOf
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { fsReason } from '../errors.js';
import { SqliteDb } from './sqlite.js';
import { migrate } from './migrations.js';
import * as ledger from './ledger.js';
import * as results from './results.js';
import * as idempotency from './idempotency.js';
import * as jobs from './jobs.js';
import type { StoreContext, RunRecord, RecordRunOptions } from './ledger.js';
import type { IdempotencyRef } from './idempotency.js';
import type { Queryable } from './sqlite.js';

export type { AccountInfo, AuthResult, Channel, KeyInfo, Plan, RunRecord, UsageDay } from './ledger.js';
export type { StoredResult } from './results.js';
export type { IdempotencyClaim, IdempotencyRef } from './idempotency.js';
export type { Delivery, DeliveryInfo, DeliveryUpdate, JobError, JobRow, JobSourceKind, JobStatus, NewJob } from './jobs.js';
export type { RecordRunOptions } from './ledger.js';

export const DB_FILE = 'cutout.db';

export class Store {
  private readonly ctx: StoreContext;

  constructor(readonly db: SqliteDb, readonly dataDir: string, now: () => number = Date.now) {
    this.ctx = { db, dataDir, now };
  }

  createKey(opts: { name?: string | null; test?: boolean; accountId?: string | null } = {}) { return ledger.createKey(this.ctx, opts); }
  listKeys() { return ledger.listKeys(this.ctx); }
  revokeKey(id: string) { return ledger.revokeKey(this.ctx, id); }
  authenticate(rawKey: string) { return ledger.authenticate(this.ctx, rawKey); }
  marketplaceAccount(user: string) { return ledger.marketplaceAccount(this.ctx, user); }
  addCredits(accountOrKeyId: string, amount: number) { return ledger.addCredits(this.ctx, accountOrKeyId, amount); }
  balance(accountId: string) { return ledger.balance(this.ctx, accountId); }
  resolveAccount(accountOrKeyId: string) { return ledger.resolveAccount(this.ctx, accountOrKeyId); }
  recordRun(run: RunRecord, options?: RecordRunOptions) { return ledger.recordRun(this.ctx, run, options); }
  account(accountId: string | null) { return ledger.account(this.ctx, accountId); }
  usage(accountId: string | null) { return ledger.usage(this.ctx, accountId); }

  writeResultFile(jobId: string, ext: string, data: Buffer) { return results.writeResultFile(this.ctx, jobId, ext, data); }
  getResult(jobId: string, ttlSeconds: number) { return results.getResult(this.ctx, jobId, ttlSeconds); }
  purgeResults(ttlSeconds: number) { return results.purgeResults(this.ctx, ttlSeconds); }

  claimIdempotencyKey(ref: IdempotencyRef, fingerprint: string, ttlSeconds: number) { return idempotency.claimIdempotencyKey(this.ctx, ref, fingerprint, ttlSeconds); }
  completeIdempotencyKey(ref: IdempotencyRef, response: unknown, q?: Queryable) { return idempotency.completeIdempotencyKey(this.ctx, ref, response, q); }
  releaseIdempotencyKey(ref: IdempotencyRef) { return idempotency.releaseIdempotencyKey(this.ctx, ref); }
  pendingIdempotencyClaim(ref: IdempotencyRef) { return idempotency.pendingIdempotencyClaim(this.ctx, ref); }
  resetIdempotencyKeys(ttlSeconds: number) { return idempotency.resetIdempotencyKeys(this.ctx, ttlSeconds); }
  purgeIdempotencyKeys(ttlSeconds: number) { return idempotency.purgeIdempotencyKeys(this.ctx, ttlSeconds); }

  writeJobInput(jobId: string, data: Buffer) { return jobs.writeJobInput(this.ctx, jobId, data); }
  removeJobInput(file: string | null) { return jobs.removeJobInput(file); }
  removeOrphanJobInputs() { return jobs.removeOrphanJobInputs(this.ctx); }
  createJobs(list: jobs.NewJob[], queueLimit: number, within?: (tx: Queryable) => Promise<void>) { return jobs.createJobs(this.ctx, list, queueLimit, within); }
  jobCounts() { return jobs.jobCounts(this.ctx); }
  claimNextJob(leaseMs: number) { return jobs.claimNextJob(this.ctx, leaseMs); }
  renewJobLease(id: string, attempt: number, leaseMs: number) { return jobs.renewJobLease(this.ctx, id, attempt, leaseMs); }
  markJobDoneIn(tx: Queryable, id: string, attempt: number, done: { creditsCharged: number; creditsRemaining: number | null }, callback: { url: string; body: string } | null) {
    return jobs.markJobDoneIn(this.ctx, tx, id, attempt, done, callback);
  }
  failJob(id: string, attempt: number, error: jobs.JobError, callback: { url: string; body: string } | null) { return jobs.failJob(this.ctx, id, attempt, error, callback); }
  requeueJobs(claims: { id: string; attempt: number }[]) { return jobs.requeueJobs(this.ctx, claims); }
  recoverJobs(maxAttempts: number) { return jobs.recoverJobs(this.ctx, maxAttempts); }
  requeueExpiredLeases(runningHere: string[]) { return jobs.requeueExpiredLeases(this.ctx, runningHere); }
  getJob(id: string, accountId: string) { return jobs.getJob(this.ctx, id, accountId); }
  getJobById(id: string) { return jobs.getJobById(this.ctx, id); }
  purgeJobs(ttlSeconds: number) { return jobs.purgeJobs(this.ctx, ttlSeconds); }
  dueDeliveries(limit: number) { return jobs.dueDeliveries(this.ctx, limit); }
  nextDeliveryAt() { return jobs.nextDeliveryAt(this.ctx); }
  recordDeliveryAttempt(id: number, update: jobs.DeliveryUpdate) { return jobs.recordDeliveryAttempt(this.ctx, id, update); }
  deliveriesOf(jobId: string) { return jobs.deliveriesOf(this.ctx, jobId); }

  /** Which engine holds the state (health and metrics name it). */
  get kind(): 'sqlite' | 'postgres' { return 'sqlite'; }

  /** Milliseconds since the epoch, by the store's clock. */
  now(): number { return this.ctx.now(); }

  close(): Promise<void> { return this.db.close(); }
}

/** SQLite's error in words: "SQLITE_NOTADB: file is not a database" -> "file is not a database". */
function sqliteReason(err: unknown): string {
  const message = String((err as Error)?.message ?? err);
  return message.replace(/^SQLITE_[A-Z_]+: /, '').split('\n')[0];
}

/**
 * Opens the store of a data directory, creating the directory and the database and bringing the
 * schema up to date. `now` replaces the clock (tests). A file that is not a database, or a
 * damaged one, is named in the error and left as it is for the operator to look at.
 */
export async function openStore(dataDir: string, options: { now?: () => number } = {}): Promise<Store> {
  const dir = path.resolve(dataDir);
  const file = path.join(dir, DB_FILE);
  try {
    await fs.mkdir(dir, { recursive: true });
  } catch (err) {
    throw new Error(`Cannot use ${dir} as the data directory: ${(err as NodeJS.ErrnoException).code === 'EEXIST' ? 'it is a file' : fsReason(err)}`);
  }
  let db: SqliteDb | undefined;
  try {
    db = await SqliteDb.open(file);
    await migrate(db);
  } catch (err) {
    await db?.close().catch(() => undefined);
    throw new Error(`Cannot open the store ${file}: ${sqliteReason(err)}`);
  }
  return new Store(db, dir, options.now);
}
