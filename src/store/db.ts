/**
 * The store: one interface over two engines with the same behaviour.
 *   - SQLite (default): `<dataDir>/cutout.db` (WAL), result and job-input files in the data directory.
 *   - PostgreSQL (`--store postgres://...`): everything, bytes included, in the database, shared by
 *     a fleet of servers.
 * Result bytes have a placement of their own (results-bytes.ts), chosen apart from the engine:
 * by default the engine's (files, or the row), or an object store (`results: s3://...`) beside
 * either. Nothing above this file knows which engine or placement it talks to; `store.kind` and
 * `store.resultsKind` say it (for health and readiness).
 *
 *   const store = await openStore(dataDir, { url? })  // creates the dir / connects, migrates; `await store.close()` at the end
 *   store.createKey({ name?, test?, accountId? })     -> { id, key, account, credits }   (new account: 10 free credits)
 *   store.listKeys() -> KeyInfo[]      store.revokeKey(id) -> boolean      store.authenticate(rawKey) -> { accountId, keyId, test } | null
 *   store.addCredits(accountOrKeyId, n) -> { accountId, balance }          store.balance(accountId) -> number
 *   store.resolveAccount(accountOrKeyId) -> accountId  (throws invalid_request when unknown)
 *   store.recordRun({ id, accountId|null, keyId|null, channel, input, size, credits (an amount, src/billing.ts), ms, result?: { data, ext, name?, contentType, width, height } }, { within? })
 *        -> { creditsCharged, creditsRemaining|null }  charge + run + stored result (+ `within`) in ONE transaction; insufficient_credits at 0
 *   store.account(accountId|null), store.usage(accountId|null)
 *   store.findResult(id, ttlS) -> row | null;  store.openResult(row) -> { body: Readable, size } | null;  store.presignResult(row, ttlS) -> url | null
 *   store.getResult(id, ttlS) -> { jobId, contentType, width, height, createdAt, data } | null (read whole);  store.purgeResults(ttlS)
 *   store.pingResults() -> one trivial call to where result bytes live (readiness)
 *   idempotency: claimIdempotencyKey / completeIdempotencyKey (throws IdempotencyClaimLost) / releaseIdempotencyKey / releaseStaleIdempotencyClaim / pendingIdempotencyClaim / resetIdempotencyKeys / purgeIdempotencyKeys
 *   rate limit: hitRateLimit(rateKey, limit, windowMs) -> RateDecision;  purgeRateWindows(windowMs)
 *   jobs: createJobs, claimNextJob, renewJobLease, markJobDoneIn, failJob, requeueJobs, requeueAfterOutage, reclaimAbandonedJobs, adoptAbandonedJob,
 *         readJobInput, removeJobInput, removeOrphanJobInputs, getJob, getJobById, jobCounts, purgeJobs
 *   callbacks: claimDueDeliveries, nextDeliveryAt, recordDeliveryAttempt, releaseDeliveries, deliveriesOf
 *   fleet: startHeartbeat(leaseMs), onHeartbeatFailure(fn), listServers(), sweepGoneServers(), sharedSecret(name, generate)
 *   ping() -> one trivial round trip (readiness); a store that cannot serve throws StoreUnavailable (503)
 */
import { objectStoreJobInputs } from './inputs-object-store.js';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fsReason } from '../errors.js';
import { serverIdentity } from '../identity.js';
import { fileJobInputs, fileSecrets, pidLiveness } from './engine-sqlite.js';
import { byteaJobInputs, heartbeatLiveness, tableSecrets } from './engine-postgres.js';
import type { ResultPlacement, ResultPlacementKind, ResultRow } from './results-bytes.js';
import { fileResults } from './results-files.js';
import { databaseResults } from './results-postgres.js';
import { SqliteDb } from './sqlite.js';
import type { PostgresDb } from './postgres.js';
import { migrate } from './migrations.js';
import { migratePostgres } from './migrations-postgres.js';
import { isPostgresUrl, redactUrl } from './url.js';
import * as ledger from './ledger.js';
import * as results from './results.js';
import * as idempotency from './idempotency.js';
import * as jobs from './jobs.js';
import * as deliveries from './deliveries.js';
import * as rateLimit from './rate-limit.js';
import * as servers from './servers.js';
import type { StoreContext } from './context.js';
import type { KeyStore, LedgerStore } from './ledger.js';
import { resultsOf, type ResultStore } from './results.js';
import type { IdempotencyStore } from './idempotency.js';
import type { RateLimitStore } from './rate-limit.js';
import type { JobStore } from './jobs.js';
import type { DeliveryStore } from './deliveries.js';
import type { FleetStore } from './servers.js';
import type { RunRecord, RecordRunOptions } from './ledger.js';
import type { IdempotencyRef } from './idempotency.js';
import type { Db, Queryable, StoreKind } from './sql.js';

export type { AccountInfo, AuthResult, Channel, KeyInfo, Plan, RunRecord, UsageDay } from './ledger.js';
export type { StoredResult, ResultRow } from './results.js';
export { ResultsUnavailable } from './results-bytes.js';
export type { ResultPlacementKind } from './results-bytes.js';
export type { IdempotencyClaim, IdempotencyRef, PendingClaim } from './idempotency.js';
export { IdempotencyClaimLost } from './idempotency.js';
export type { JobError, JobRow, JobSourceKind, JobStatus, NewJob } from './jobs.js';
export type { Delivery, DeliveryInfo, DeliveryUpdate } from './deliveries.js';
export type { RateDecision } from './rate-limit.js';
export type { ServerInfo } from './servers.js';
export type { RecordRunOptions, RunCharge } from './ledger.js';
export type { Queryable, StoreKind } from './sql.js';
export { StoreUnavailable } from './sql.js';

export const DB_FILE = 'cutout.db';

export class Store {
  private readonly ctx: StoreContext;
  /** The API keys. */
  readonly keys: KeyStore;
  /** Accounts, credits and the runs charged to them. */
  readonly ledger: LedgerStore;
  /** Stored results: their rows, and their bytes wherever those live. */
  readonly results: ResultStore;
  /** Idempotency-Key claims. */
  readonly idempotency: IdempotencyStore;
  /** The rate limit's windows. */
  readonly rateLimits: RateLimitStore;
  /** Jobs, their inputs and their leases. */
  readonly jobs: JobStore;
  /** Callback deliveries. */
  readonly deliveries: DeliveryStore;
  /** This server in its fleet: the heartbeat, the servers seen, the secrets they share. */
  readonly fleet: FleetStore;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private readonly heartbeatListeners = new Set<(err: unknown) => void>();

  /**
   * `owner`: the server identity its claims are made under (another one in tests of a fleet).
   * `results`: where result bytes live; default the engine's own (files, or the row).
   */
  constructor(readonly db: Db, readonly dataDir: string, now: () => number = Date.now, owner: string = serverIdentity().id, results?: ResultPlacement) {
    const postgres = db.dialect.kind === 'postgres';
    this.ctx = {
      db, dataDir, now,
      // Beside the results when they are in an object store (inputs-object-store.ts), else the engine's own.
      inputs: results?.kind === 's3' ? objectStoreJobInputs(results) : postgres ? byteaJobInputs : fileJobInputs(dataDir),
      results: results ?? (postgres ? databaseResults : fileResults(dataDir)),
      secrets: postgres ? tableSecrets : fileSecrets(dataDir),
      liveness: postgres ? heartbeatLiveness : pidLiveness,
      owner,
    };
    this.keys = ledger.keysOf(this.ctx);
    this.ledger = ledger.ledgerOf(this.ctx);
    this.results = resultsOf(this.ctx);
    this.idempotency = idempotency.idempotencyOf(this.ctx);
    this.rateLimits = rateLimit.rateLimitsOf(this.ctx);
    this.jobs = jobs.jobsOf(this.ctx);
    this.deliveries = deliveries.deliveriesStoreOf(this.ctx);
    this.fleet = servers.fleetOf(this.ctx);
  }

  /** Where result bytes live: `files`, `database` or `s3` (for health and readiness; nothing else may branch on it). */
  get resultsKind(): ResultPlacementKind { return this.ctx.results.kind; }
  /** Where result bytes live, in words without secrets (readiness, logs). */
  get resultsDescription(): string { return this.ctx.results.description; }

  /** Which engine: `sqlite` or `postgres` (for health and metrics; nothing else may branch on it). */
  get kind(): StoreKind { return this.db.dialect.kind; }

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

  getResult(jobId: string, ttlSeconds: number) { return results.getResult(this.ctx, jobId, ttlSeconds); }
  findResult(jobId: string, ttlSeconds: number) { return results.findResult(this.ctx, jobId, ttlSeconds); }
  openResult(row: ResultRow) { return results.openResult(this.ctx, row); }
  presignResult(row: ResultRow, ttlSeconds: number) { return results.presignResult(this.ctx, row, ttlSeconds); }
  /** One trivial call to where result bytes live (readiness); throws when it cannot be reached. */
  pingResults(): Promise<void> { return this.ctx.results.ping(); }
  purgeResults(ttlSeconds: number) { return results.purgeResults(this.ctx, ttlSeconds); }

  claimIdempotencyKey(ref: IdempotencyRef, fingerprint: string, ttlSeconds: number) { return idempotency.claimIdempotencyKey(this.ctx, ref, fingerprint, ttlSeconds); }
  completeIdempotencyKey(ref: IdempotencyRef, response: unknown, q?: Queryable) { return idempotency.completeIdempotencyKey(this.ctx, ref, response, q); }
  releaseIdempotencyKey(ref: IdempotencyRef) { return idempotency.releaseIdempotencyKey(this.ctx, ref); }
  releaseStaleIdempotencyClaim(ref: IdempotencyRef, seen: { owner: string | null; createdAt: number }) { return idempotency.releaseStaleIdempotencyClaim(this.ctx, ref, seen); }
  pendingIdempotencyClaim(ref: IdempotencyRef) { return idempotency.pendingIdempotencyClaim(this.ctx, ref); }
  resetIdempotencyKeys(ttlSeconds: number) { return idempotency.resetIdempotencyKeys(this.ctx, ttlSeconds); }
  purgeIdempotencyKeys(ttlSeconds: number) { return idempotency.purgeIdempotencyKeys(this.ctx, ttlSeconds); }

  hitRateLimit(rateKey: string, limit: number, windowMs: number) { return rateLimit.hitRateLimit(this.ctx, rateKey, limit, windowMs); }
  purgeRateWindows(windowMs: number) { return rateLimit.purgeRateWindows(this.ctx, windowMs); }

  createJobs(list: jobs.NewJob[], queueLimit: number, within?: (tx: Queryable) => Promise<void>) { return jobs.createJobs(this.ctx, list, queueLimit, within); }
  readJobInput(jobId: string) { return this.ctx.inputs.read(this.db, jobId); }
  removeJobInput(jobId: string) { return this.ctx.inputs.remove(this.db, jobId); }
  removeOrphanJobInputs() { return this.ctx.inputs.removeOrphans(this.db, this.ctx.now()); }
  jobCounts() { return jobs.jobCounts(this.ctx); }
  claimNextJob(leaseMs: number) { return jobs.claimNextJob(this.ctx, leaseMs); }
  renewJobLease(id: string, attempt: number, leaseMs: number) { return jobs.renewJobLease(this.ctx, id, attempt, leaseMs); }
  markJobDoneIn(tx: Queryable, id: string, attempt: number, done: Parameters<typeof jobs.markJobDoneIn>[4], callback: { url: string; body: string } | null) {
    return jobs.markJobDoneIn(this.ctx, tx, id, attempt, done, callback);
  }
  failJob(id: string, attempt: number, error: jobs.JobError, callback: { url: string; body: string } | null) { return jobs.failJob(this.ctx, id, attempt, error, callback); }
  requeueJobs(claims: { id: string; attempt: number }[]) { return jobs.requeueJobs(this.ctx, claims); }
  requeueAfterOutage(claim: { id: string; attempt: number }) { return jobs.requeueAfterOutage(this.ctx, claim); }
  reclaimAbandonedJobs(maxAttempts: number, runningHere: string[] = []) { return jobs.reclaimAbandonedJobs(this.ctx, maxAttempts, runningHere); }
  adoptAbandonedJob(job: jobs.JobRow, leaseMs: number) { return jobs.adoptAbandonedJob(this.ctx, job, leaseMs); }
  getJob(id: string, accountId: string) { return jobs.getJob(this.ctx, id, accountId); }
  getJobById(id: string) { return jobs.getJobById(this.ctx, id); }
  purgeJobs(ttlSeconds: number) { return jobs.purgeJobs(this.ctx, ttlSeconds); }

  claimDueDeliveries(limit: number, leaseMs: number) { return deliveries.claimDueDeliveries(this.ctx, limit, leaseMs); }
  nextDeliveryAt() { return deliveries.nextDeliveryAt(this.ctx); }
  recordDeliveryAttempt(id: number, update: deliveries.DeliveryUpdate) { return deliveries.recordDeliveryAttempt(this.ctx, id, update); }
  releaseDeliveries(ids: number[]) { return deliveries.releaseDeliveries(this.ctx, ids); }
  deliveriesOf(jobId: string) { return deliveries.deliveriesOf(this.ctx, jobId); }

  /**
   * Writes this server's heartbeat now and every third of `leaseMs` until close (which removes
   * the row): other servers take its Idempotency-Key claims over once it is silent for `leaseMs`.
   * Every third beat (once a lease) also sweeps for servers gone (servers.ts sweepGoneServers):
   * their old rows and their pending claims, on whichever server's timer comes first. A beat
   * still waiting for the store is not doubled; a beat that fails is told to the
   * onHeartbeatFailure listeners (metrics) and tried again at the next tick.
   */
  async startHeartbeat(leaseMs: number): Promise<void> {
    await servers.heartbeat(this.ctx, leaseMs);
    if (this.heartbeatTimer) return;
    let beats = 0;
    let beating = false;
    this.heartbeatTimer = setInterval(() => {
      if (beating) return;
      beating = true;
      const sweep = ++beats % 3 === 0;
      void (async () => {
        try {
          await servers.heartbeat(this.ctx, leaseMs);
        } catch (err) {
          for (const listener of this.heartbeatListeners) listener(err);
          return;
        }
        if (sweep) await servers.sweepGoneServers(this.ctx).catch(() => undefined);
      })().finally(() => { beating = false; });
    }, Math.max(100, Math.floor(leaseMs / 3)));
    this.heartbeatTimer.unref();
  }
  /** Calls `listener` with the error of every heartbeat that fails (the store unreachable or too slow). */
  onHeartbeatFailure(listener: (err: unknown) => void): void { this.heartbeatListeners.add(listener); }
  listServers() { return servers.listServers(this.ctx); }
  /** See servers.ts: old rows of dead servers, and the pending claims of servers gone. */
  sweepGoneServers() { return servers.sweepGoneServers(this.ctx); }

  /** One trivial round trip to the store (readiness). */
  async ping(): Promise<void> {
    await this.db.get('SELECT 1');
  }

  /** A secret shared by every server on this store, generated by `generate` the first time (see engine.ts SharedSecrets). */
  sharedSecret(name: string, generate: () => string) { return this.ctx.secrets(this.db, name, generate); }

  /**
   * Calls `onQueued` when jobs are queued anywhere in the fleet (PostgreSQL's LISTEN/NOTIFY), so an
   * idle server claims them at once; with SQLite, never (one host: the sweep finds them).
   */
  onJobsQueued(onQueued: () => void): Promise<void> { return this.db.listen(jobs.JOBS_QUEUED_CHANNEL, onQueued); }

  /** Milliseconds since the epoch, by the store's clock. */
  now(): number { return this.ctx.now(); }

  async close(): Promise<void> {
    if (this.heartbeatTimer) {
      clearInterval(this.heartbeatTimer);
      this.heartbeatTimer = null;
      await servers.leave(this.ctx).catch(() => undefined);
    }
    this.ctx.results.close();
    await this.db.close();
  }
}

/** SQLite's error in words: "SQLITE_NOTADB: file is not a database" -> "file is not a database". */
function sqliteReason(err: unknown): string {
  const message = String((err as Error)?.message ?? err);
  return message.replace(/^SQLITE_[A-Z_]+: /, '').split('\n')[0];
}

export { isPostgresUrl, redactUrl } from './url.js';

export interface OpenStoreOptions {
  /** Replaces the clock (tests). */
  now?: () => number;
  /** A postgres:// URL; absent or null: SQLite in the data directory. */
  url?: string | null;
  /**
   * The server identity (src/identity.ts) this store's claims and heartbeat are made under;
   * default this process's. Tests give two stores in one process two identities, as two servers.
   */
  owner?: string;
  /**
   * Where result bytes live: `s3://BUCKET[/PREFIX]` (an S3-compatible object store); absent or
   * null: the engine's own place (files in the data directory, or the row for PostgreSQL).
   */
  results?: string | null;
  /** Path-style addressing for the object store (MinIO and most self-hosted stores). */
  resultsPathStyle?: boolean;
}

/**
 * Opens the store: PostgreSQL when `options.url` is given, else SQLite in the data directory
 * (created if needed). Brings the schema up to date. A file that is not a database, or a damaged
 * one, is named in the error and left as it is for the operator to look at.
 */
export async function openStore(dataDir: string, options: OpenStoreOptions = {}): Promise<Store> {
  // The object store first: a start that cannot use it fails before any connection is opened.
  const placement = options.results
    ? await (await import('./results-s3.js')).openS3Results(options.results, { pathStyle: options.resultsPathStyle })
    : undefined;
  try {
    return await openEngine(path.resolve(dataDir), options, placement);
  } catch (err) {
    placement?.close();
    throw err;
  }
}

async function openEngine(dir: string, options: OpenStoreOptions, placement: ResultPlacement | undefined): Promise<Store> {
  if (options.url) {
    if (!isPostgresUrl(options.url)) throw new Error(`Unsupported store ${redactUrl(options.url)}: expected postgres://USER[:PASS]@HOST[:PORT]/DB`);
    let db: PostgresDb | undefined;
    try {
      // node-postgres loads only for a PostgreSQL store: about 70 ms of every CLI start otherwise.
      const { PostgresDb } = await import('./postgres.js');
      db = await PostgresDb.open(options.url);
      await migratePostgres(db);
    } catch (err) {
      await db?.close().catch(() => undefined);
      throw new Error(`Cannot open the store ${redactUrl(options.url)}: ${String((err as Error)?.message ?? err).split('\n')[0]}`);
    }
    return new Store(db, dir, options.now, options.owner, placement);
  }
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
  return new Store(db, dir, options.now, options.owner, placement);
}
