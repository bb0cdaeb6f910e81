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
 *   store.writeResultFile(id, ext, data) -> path; store.getResult(id, ttlS); store.purgeResults(ttlS); idempotency: claim/complete/release
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { SqliteDb } from './sqlite.js';
import { migrate } from './migrations.js';
import * as ledger from './ledger.js';
import * as results from './results.js';
import * as idempotency from './idempotency.js';
import type { StoreContext, RunRecord } from './ledger.js';
import type { IdempotencyRef } from './idempotency.js';

export type { AccountInfo, AuthResult, Channel, KeyInfo, Plan, RunRecord, UsageDay } from './ledger.js';
export type { StoredResult } from './results.js';
export type { IdempotencyClaim, IdempotencyRef } from './idempotency.js';

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
  recordRun(run: RunRecord) { return ledger.recordRun(this.ctx, run); }
  account(accountId: string | null) { return ledger.account(this.ctx, accountId); }
  usage(accountId: string | null) { return ledger.usage(this.ctx, accountId); }

  writeResultFile(jobId: string, ext: string, data: Buffer) { return results.writeResultFile(this.ctx, jobId, ext, data); }
  getResult(jobId: string, ttlSeconds: number) { return results.getResult(this.ctx, jobId, ttlSeconds); }
  purgeResults(ttlSeconds: number) { return results.purgeResults(this.ctx, ttlSeconds); }

  claimIdempotencyKey(ref: IdempotencyRef, fingerprint: string, ttlSeconds: number) { return idempotency.claimIdempotencyKey(this.ctx, ref, fingerprint, ttlSeconds); }
  completeIdempotencyKey(ref: IdempotencyRef, response: unknown) { return idempotency.completeIdempotencyKey(this.ctx, ref, response); }
  releaseIdempotencyKey(ref: IdempotencyRef) { return idempotency.releaseIdempotencyKey(this.ctx, ref); }
  resetIdempotencyKeys(ttlSeconds: number) { return idempotency.resetIdempotencyKeys(this.ctx, ttlSeconds); }
  purgeIdempotencyKeys(ttlSeconds: number) { return idempotency.purgeIdempotencyKeys(this.ctx, ttlSeconds); }

  close(): Promise<void> { return this.db.close(); }
}

/**
 * Opens the store of a data directory, creating the directory and the database and bringing the
 * schema up to date. `now` replaces the clock (tests).
 */
export async function openStore(dataDir: string, options: { now?: () => number } = {}): Promise<Store> {
  const dir = path.resolve(dataDir);
  await fs.mkdir(dir, { recursive: true });
  const db = await SqliteDb.open(path.join(dir, DB_FILE));
  try {
    await migrate(db);
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
  return new Store(db, dir, options.now);
}
