/**
 * The store: one interface over two engines with the same behaviour.
 *   - SQLite (default): `<dataDir>/cutout.db` (WAL), result and job-input files in the data directory.
 *   - PostgreSQL (`--store postgres://...`): everything, bytes included, in the database, shared by
 *     a fleet of servers.
 * Result bytes have a placement of their own (results-bytes.ts), chosen apart from the engine:
 * by default the engine's (files, or the row), or an object store (`results: s3://...`) beside
 * either. Nothing above this file knows which engine or placement it talks to; `store.kind` and
 * `store.results.kind` say it (for health and readiness).
 *
 * The store is its concerns, each an object made by its own module over one StoreContext
 * (context.ts), so that a caller names what it needs (`Pick<Store, 'jobs'>`, or one concern's
 * methods) and a module holds one concern:
 *
 *   const store = await openStore(dataDir, { url? })  // creates the dir / connects, migrates; `await store.close()` at the end
 *   store.keys (ledger.ts)         create({ name?, test?, accountId?, expiresAt?, rateLimit?, labels? }, audit?) -> { id, key, account, credits }
 *                                  (new account: 10 free credits), list(), page({ accountId?, after?, limit }), get(id),
 *                                  update(id, patch, audit?), revoke(id, audit?),
 *                                  authenticate(rawKey) -> { accountId, keyId, test, rateLimit } | null (throws key_expired)
 *   store.ledger (ledger.ts)       addCredits(accountOrKeyId, n, { note?, audit? }) (n < 0: a correction), balance(accountId), resolveAccount(accountOrKeyId),
 *                                  recordRun(run, { within? }): charge + run + stored result (+ `within`) in ONE transaction,
 *                                  insufficient_credits at 0; account(accountId|null), usage(accountId|null), marketplaceAccount(user)
 *   store.results (results.ts)     find(id, ttlS), open(row), presign(row, ttlS), get(id, ttlS) (read whole), purge(ttlS),
 *                                  ping() (where result bytes live), kind, description
 *   store.idempotency (idempotency.ts)  claim, complete (throws IdempotencyClaimLost), release, releaseStale, pending, reset, purge
 *   store.rateLimits (rate-limit.ts)    hit(rateKey, limit, windowMs) -> RateDecision, purge(windowMs)
 *   store.jobs (jobs.ts)           create, claimNext, renewLease, markDoneIn, fail, requeue, requeueAfterOutage, reclaimAbandoned,
 *                                  adoptAbandoned, readInput, removeInput, removeOrphanInputs, get, getById, counts, purge, onQueued
 *   store.deliveries (deliveries.ts)    claimDue, nextAt, recordAttempt, release, of
 *   store.audit (audit.ts)         append(event, q?), list({ since?, action?, after?, limit }): append-only, also by the database
 *   store.fleet (servers.ts)       startHeartbeat(leaseMs), onHeartbeatFailure(fn), list(), sweepGone(), sharedSecret(name, generate)
 *   store.ping() -> one trivial round trip (readiness); a store that cannot serve throws StoreUnavailable (503)
 */
import { objectStoreJobInputs } from './inputs-object-store.js';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fsReason } from '../errors.js';
import { serverIdentity } from '../identity.js';
import { fileJobInputs, fileSecrets, pidLiveness } from './engine-sqlite.js';
import { byteaJobInputs, heartbeatLiveness, tableSecrets } from './engine-postgres.js';
import type { ResultPlacement } from './results-bytes.js';
import { fileResults } from './results-files.js';
import { databaseResults } from './results-postgres.js';
import { SqliteDb } from './sqlite.js';
import type { PostgresDb } from './postgres.js';
import { migrate } from './migrations.js';
import { migratePostgres } from './migrations-postgres.js';
import { isPostgresUrl, redactUrl } from './url.js';
import type { StoreContext } from './context.js';
import { keysOf, ledgerOf, type KeyStore, type LedgerStore } from './ledger.js';
import { resultsOf, type ResultStore } from './results.js';
import { idempotencyOf, type IdempotencyStore } from './idempotency.js';
import { rateLimitsOf, type RateLimitStore } from './rate-limit.js';
import { jobsOf, type JobStore } from './jobs.js';
import { deliveriesStoreOf, type DeliveryStore } from './deliveries.js';
import { fleetOf, type FleetStore } from './servers.js';
import { auditOf, type AuditStore } from './audit.js';
import type { Db, StoreKind } from './sql.js';

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
export type { AuditActor, AuditEvent, AuditOutcome, AuditQuery, NewAuditEvent } from './audit.js';
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
  /** The audit trail: append-only events of admin requests and key or credit changes. */
  readonly audit: AuditStore;

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
    this.keys = keysOf(this.ctx);
    this.ledger = ledgerOf(this.ctx);
    this.results = resultsOf(this.ctx);
    this.idempotency = idempotencyOf(this.ctx);
    this.rateLimits = rateLimitsOf(this.ctx);
    this.jobs = jobsOf(this.ctx);
    this.deliveries = deliveriesStoreOf(this.ctx);
    this.fleet = fleetOf(this.ctx);
    this.audit = auditOf(this.ctx);
  }

  /** Which engine: `sqlite` or `postgres` (for health and metrics; nothing else may branch on it). */
  get kind(): StoreKind { return this.db.dialect.kind; }

  /** One trivial round trip to the store (readiness). */
  async ping(): Promise<void> {
    await this.db.get('SELECT 1');
  }

  /** Milliseconds since the epoch, by the store's clock. */
  now(): number { return this.ctx.now(); }

  async close(): Promise<void> {
    await this.fleet.leave();
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
