/**
 * Accounts, hashed API keys, the credit ledger, runs and usage. A balance is the sum of the
 * account's ledger rows; a charge is a row of minus its amount written in the same transaction as
 * the run and its stored result, so no result exists unpaid and no charge exists without a result.
 * What a run costs is decided by src/billing.ts; the ledger writes the amount it is given.
 */
import crypto from 'node:crypto';
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import type { ResultFields } from '../result-fields.js';
import { auditIn, type AuditActor } from './audit.js';
import { sqlNow } from './clock.js';
import { boundTo, type StoreContext } from './context.js';
import { insertResultIn } from './results-row.js';
import type { Queryable } from './sql.js';
import { recentRuns, type Channel } from './runs.js';

export type { Channel };
export type Plan = 'free' | 'paid' | 'marketplace' | 'local';

export interface RunRecord {
  /** UUID of the removal; also the result's job_id. */
  id: string;
  /** null: a local CLI run without --key (recorded, never charged). */
  accountId: string | null;
  keyId: string | null;
  channel: Channel;
  /** A description of the input for the operator: a file name, a URL host, "upload". */
  input: string;
  size: 'preview' | 'full';
  /** The amount to charge (src/billing.ts chargeFor); 0: recorded, not charged. */
  credits: number;
  ms: number;
  /**
   * The result to store with the run. `name` makes the stored copy unique per attempt (a job's
   * `<id>.<attempt>`), so a run that lost its claim discards only its own bytes; default `id`.
   * `fields`: what it says of itself (result-fields.ts), kept in the row's `result_fields`.
   */
  result?: { data: Buffer; ext: string; name?: string; contentType: string; width: number; height: number; fields?: Partial<ResultFields> };
}

export interface KeyInfo {
  id: string;
  accountId: string;
  name: string | null;
  test: boolean;
  /** Last 4 characters of the key. */
  hint: string;
  createdAt: string;
  revokedAt: string | null;
  /** After it the key is refused with reason `key_expired`; null: never. */
  expiresAt: string | null;
  /** Requests per minute of this key, in place of the server's `--rate-limit`; null: the server's. */
  rateLimit: number | null;
  labels: Record<string, string>;
}

/** What an operator sets on a key beside its name (the admin API, `cutout keys create`). */
export interface KeyLimits {
  /** ms since the epoch; null: never expires. */
  expiresAt?: number | null;
  rateLimit?: number | null;
  labels?: Record<string, string> | null;
}

export interface AuthResult {
  accountId: string;
  keyId: string;
  test: boolean;
  /** The key's own rate limit per minute; null: the server's. */
  rateLimit: number | null;
}

/** How a key is shown (the admin API, `cutout keys list --json`): never its secret. */
export function keyBody(k: KeyInfo) {
  return {
    id: k.id, account: k.accountId, name: k.name, mode: k.test ? 'test' as const : 'live' as const, test: k.test, hint: k.hint,
    created_at: k.createdAt, expires_at: k.expiresAt, revoked_at: k.revokedAt, rate_limit: k.rateLimit, labels: k.labels,
  };
}

/** The largest per-key rate limit, as the server's own setting's. */
const MAX_KEY_RATE_LIMIT = 1_000_000;
const MAX_LABELS = 32;
const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9_.\/-]{0,62}$/;
const MAX_LABEL_VALUE = 256;

/** Checks a key's limits wherever they come from (an admin's JSON, the CLI's flags): invalid_request naming the field. */
function checkKeyLimits(limits: KeyLimits): void {
  const bad = (param: string, what: string) => new CutoutError('invalid_request', `${param}: ${what}`, { param });
  const { expiresAt, rateLimit, labels } = limits;
  if (expiresAt != null && !Number.isSafeInteger(expiresAt)) throw bad('expires_at', 'expected a time');
  if (rateLimit != null && (!Number.isInteger(rateLimit) || rateLimit < 1 || rateLimit > MAX_KEY_RATE_LIMIT)) {
    throw bad('rate_limit', `expected a whole number of requests per minute from 1 to ${MAX_KEY_RATE_LIMIT}, or null`);
  }
  if (labels == null) return;
  const entries = Object.entries(labels);
  if (entries.length > MAX_LABELS) throw bad('labels', `at most ${MAX_LABELS} labels`);
  for (const [k, v] of entries) {
    if (!LABEL_KEY.test(k)) throw bad('labels', `a label's name is 1 to 63 characters of A-Z a-z 0-9 _ . / -, starting with a letter or digit (got ${JSON.stringify(k)})`);
    if (typeof v !== 'string' || v.length > MAX_LABEL_VALUE) throw bad('labels', `the value of ${k} must be a string of at most ${MAX_LABEL_VALUE} characters`);
  }
}

export interface AccountInfo {
  accountId: string | null;
  balance: number;
  plan: Plan;
  creditsUsedThisMonth: number;
  requestsThisMonth: number;
  test: boolean;
}

/**
 * The body of GET /api/v1/account (and of `cutout account --json`). `test` is the mode of the key
 * making the call, not of the account: a test key is never charged.
 */
export function accountBody(info: AccountInfo, test: boolean): { account_id: string | null; balance: number; plan: Plan; credits_used_this_month: number; test: boolean } {
  return { account_id: info.accountId, balance: info.balance, plan: info.plan, credits_used_this_month: info.creditsUsedThisMonth, test };
}

export interface UsageDay { date: string; credits: number; requests: number }

const KEY_PATTERN = /^cut_(live|test)_[A-Za-z0-9_-]{32}$/;

function newId(prefix: string): string {
  return `${prefix}_${crypto.randomBytes(8).toString('hex')}`;
}

function sha256(text: string): Buffer {
  return crypto.createHash('sha256').update(text).digest();
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

async function balanceIn(q: Queryable, accountId: string): Promise<number> {
  const row = await q.get<{ balance: number | null }>('SELECT SUM(delta) AS balance FROM ledger WHERE account_id = ?', [accountId]);
  return row?.balance ?? 0;
}

async function accountOf(q: Queryable, accountOrKeyId: string): Promise<string> {
  const row = await q.get<{ id: string }>(
    'SELECT id FROM accounts WHERE id = ? UNION SELECT account_id AS id FROM api_keys WHERE id = ?',
    [accountOrKeyId, accountOrKeyId],
  );
  if (!row) throw new CutoutError('invalid_request', `No account or API key with id ${JSON.stringify(accountOrKeyId)}`);
  return row.id;
}

/**
 * Creates a key; without `accountId` also a new account with the free credits. Returns the key once.
 * With `audit`, the event (never the secret) commits with the key.
 */
export async function createKey(ctx: StoreContext, opts: { name?: string | null; test?: boolean; accountId?: string | null } & KeyLimits = {}, audit?: AuditActor) {
  checkKeyLimits(opts);
  const test = opts.test === true;
  const secret = crypto.randomBytes(24).toString('base64url'); // 32 characters, 192 bits
  const key = `cut_${test ? 'test' : 'live'}_${secret}`;
  const id = newId('key');
  const [created, event] = await ctx.db.transaction(async (tx) => {
    const now = ctx.now();
    let accountId = opts.accountId ?? null;
    if (accountId === null) {
      accountId = newId('acct');
      await tx.run('INSERT INTO accounts (id, plan, test, created_at) VALUES (?, ?, ?, ?)', [accountId, 'free', test ? 1 : 0, now]);
      await tx.run('INSERT INTO ledger (account_id, delta, reason, created_at) VALUES (?, ?, ?, ?)', [accountId, LIMITS.freeCredits, 'free_grant', now]);
    } else if (!(await tx.get('SELECT 1 FROM accounts WHERE id = ?', [accountId]))) {
      throw new CutoutError('invalid_request', `No account with id ${JSON.stringify(accountId)}`);
    }
    await tx.run('INSERT INTO api_keys (id, account_id, name, kind, hash, hint, created_at, expires_at, rate_limit, labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', [
      id, accountId, opts.name ?? null, test ? 'test' : 'live', sha256(key).toString('hex'), key.slice(-4), now,
      opts.expiresAt ?? null, opts.rateLimit ?? null, opts.labels ? JSON.stringify(opts.labels) : null,
    ]);
    const result = { id, key, account: accountId, credits: await balanceIn(tx, accountId) };
    const detail = { account: accountId, name: opts.name ?? null, mode: test ? 'test' : 'live', new_account: opts.accountId == null, expires_at: iso(opts.expiresAt ?? null), rate_limit: opts.rateLimit ?? null, labels: opts.labels ?? null };
    return [result, await auditIn(ctx, tx, audit, { action: 'key.create', target: id, detail })] as const;
  });
  if (event) audit?.onRecorded?.(event);
  return created;
}

interface KeyRow {
  id: string; account_id: string; name: string | null; kind: string; hint: string; created_at: number | string;
  revoked_at: number | string | null; expires_at: number | string | null; rate_limit: number | null; labels: string | null; rowid: number | string;
}
const KEY_COLUMNS = 'id, account_id, name, kind, hint, created_at, revoked_at, expires_at, rate_limit, labels, rowid';

function keyInfoOf(r: KeyRow): KeyInfo {
  const ms = (v: number | string | null) => (v === null ? null : Number(v));
  return {
    id: r.id, accountId: r.account_id, name: r.name, test: r.kind === 'test', hint: r.hint,
    createdAt: iso(Number(r.created_at)) as string, revokedAt: iso(ms(r.revoked_at)), expiresAt: iso(ms(r.expires_at)),
    rateLimit: r.rate_limit === null ? null : Number(r.rate_limit), labels: r.labels ? JSON.parse(r.labels) as Record<string, string> : {},
  };
}

export async function listKeys(ctx: StoreContext): Promise<KeyInfo[]> {
  const rows = await ctx.db.all<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, rowid`);
  return rows.map(keyInfoOf);
}

/** One page of keys in creation order, of one account or all; `next` is the cursor of the next page. */
export async function pageKeys(ctx: StoreContext, query: { accountId?: string | null; after?: number | null; limit: number }): Promise<{ keys: KeyInfo[]; next: number | null }> {
  const rows = await ctx.db.all<KeyRow>(
    `SELECT ${KEY_COLUMNS} FROM api_keys WHERE (CAST(? AS TEXT) IS NULL OR account_id = ?) AND rowid > ? ORDER BY rowid LIMIT ?`,
    [query.accountId ?? null, query.accountId ?? null, query.after ?? 0, query.limit + 1],
  );
  const page = rows.slice(0, query.limit);
  return { keys: page.map(keyInfoOf), next: rows.length > query.limit ? Number(page[page.length - 1].rowid) : null };
}

/** A key by id, or null. */
export async function getKey(ctx: StoreContext, id: string): Promise<KeyInfo | null> {
  const row = await ctx.db.get<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`, [id]);
  return row ? keyInfoOf(row) : null;
}

/**
 * Changes a key's name, expiry, rate limit or labels (a field left out stays; null clears it).
 * Takes effect on the key's next request on every server: keys are read from the store on every
 * request, never cached. Throws not_found for an unknown id.
 */
export async function updateKey(ctx: StoreContext, id: string, patch: { name?: string | null } & KeyLimits, audit?: AuditActor): Promise<KeyInfo> {
  checkKeyLimits(patch);
  const sets: string[] = [];
  const params: (string | number | null)[] = [];
  const set = (column: string, value: string | number | null) => { sets.push(`${column} = ?`); params.push(value); };
  if (patch.name !== undefined) set('name', patch.name);
  if (patch.expiresAt !== undefined) set('expires_at', patch.expiresAt);
  if (patch.rateLimit !== undefined) set('rate_limit', patch.rateLimit);
  if (patch.labels !== undefined) set('labels', patch.labels ? JSON.stringify(patch.labels) : null);
  const [info, event] = await ctx.db.transaction(async (tx) => {
    if (sets.length && (await tx.run(`UPDATE api_keys SET ${sets.join(', ')} WHERE id = ?`, [...params, id])).changes === 0) throw noKey(id);
    const row = await tx.get<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`, [id]);
    if (!row) throw noKey(id);
    const detail = { ...(patch.name !== undefined ? { name: patch.name } : {}), ...(patch.expiresAt !== undefined ? { expires_at: iso(patch.expiresAt) } : {}), ...(patch.rateLimit !== undefined ? { rate_limit: patch.rateLimit } : {}), ...(patch.labels !== undefined ? { labels: patch.labels } : {}) };
    return [keyInfoOf(row), await auditIn(ctx, tx, audit, { action: 'key.update', target: id, detail })] as const;
  });
  if (event) audit?.onRecorded?.(event);
  return info;
}

function noKey(id: string): CutoutError {
  return new CutoutError('not_found', `No API key with id ${JSON.stringify(id)}`);
}

/**
 * Revokes a key by id, for every server at once (keys are read on every request, never cached).
 * Returns false when it was already revoked; throws invalid_request when there is no such key.
 */
export async function revokeKey(ctx: StoreContext, id: string, audit?: AuditActor): Promise<boolean> {
  const [revoked, event] = await ctx.db.transaction(async (tx) => {
    const row = await tx.get<{ revoked_at: number | null }>('SELECT revoked_at FROM api_keys WHERE id = ?', [id]);
    if (!row) throw new CutoutError('invalid_request', `No API key with id ${JSON.stringify(id)}`);
    if (row.revoked_at === null) await tx.run('UPDATE api_keys SET revoked_at = ? WHERE id = ?', [ctx.now(), id]);
    const done = row.revoked_at === null;
    return [done, await auditIn(ctx, tx, audit, { action: 'key.revoke', target: id, detail: { already_revoked: !done } })] as const;
  });
  if (event) audit?.onRecorded?.(event);
  return revoked;
}

/**
 * Looks a raw key up by its hash, on every call (no cache: a revocation or a change made on any
 * server holds from the next request). Returns null for a malformed, unknown or revoked key;
 * throws invalid_api_key with reason `key_expired` once the key's `expires_at` has passed by the
 * store's clock (PostgreSQL's own on a fleet, read in the same statement; clock.ts).
 */
export async function authenticate(ctx: StoreContext, rawKey: string): Promise<AuthResult | null> {
  if (!KEY_PATTERN.test(rawKey)) return null;
  const digest = sha256(rawKey);
  const row = await ctx.db.get<{ id: string; account_id: string; kind: string; hash: string; revoked_at: number | null; expires_at: number | string | null; rate_limit: number | null; now: number | string }>(
    `SELECT id, account_id, kind, hash, revoked_at, expires_at, rate_limit, ${sqlNow(ctx)} AS now FROM api_keys WHERE hash = ?`, [digest.toString('hex')],
  );
  // The lookup is by hash already; the constant-time compare keeps the final decision free of early exits.
  if (!row || !crypto.timingSafeEqual(Buffer.from(row.hash, 'hex'), digest) || row.revoked_at !== null) return null;
  if (row.expires_at !== null && Number(row.expires_at) <= Number(row.now)) {
    throw new CutoutError('invalid_api_key', `This API key expired at ${iso(Number(row.expires_at))}.`, { reason: 'key_expired' });
  }
  return { accountId: row.account_id, keyId: row.id, test: row.kind === 'test', rateLimit: row.rate_limit === null ? null : Number(row.rate_limit) };
}

/** The account that stands for a marketplace user, opened on first sight (billed by the marketplace: no free grant). */
export async function marketplaceAccount(ctx: StoreContext, user: string): Promise<string> {
  return ctx.db.transaction(async (tx) => {
    // ON CONFLICT: two servers seeing a new user at once open one account between them.
    await tx.run('INSERT INTO accounts (id, plan, test, marketplace_user, created_at) VALUES (?, ?, 0, ?, ?) ON CONFLICT (marketplace_user) DO NOTHING', [
      newId('acct'), 'marketplace', user, ctx.now(),
    ]);
    const row = await tx.get<{ id: string }>('SELECT id FROM accounts WHERE marketplace_user = ?', [user]);
    return (row as { id: string }).id;
  });
}

const MAX_CREDIT_CHANGE = 1_000_000_000;

/**
 * Adds purchased credits (they never expire) to an account, given its id or one of its keys' ids.
 * A negative amount is a correction (an operator's, with its `note`), refused when it would take
 * the balance below 0. With `audit`, the event commits with the ledger row.
 */
export async function addCredits(ctx: StoreContext, accountOrKeyId: string, amount: number, opts: { note?: string | null; audit?: AuditActor } = {}) {
  if (!Number.isInteger(amount) || amount === 0 || Math.abs(amount) > MAX_CREDIT_CHANGE) {
    throw new CutoutError('invalid_request', `Expected a whole number from 1 to ${MAX_CREDIT_CHANGE} (or down to -${MAX_CREDIT_CHANGE} for a correction) for AMOUNT but received ${JSON.stringify(amount)}`, { param: 'amount' });
  }
  const [result, event] = await ctx.db.transaction(async (tx) => {
    const accountId = await accountOf(tx, accountOrKeyId);
    if (amount < 0) {
      // The account's row lock, as a charge takes it: a correction and a charge do not both spend the last credits.
      await tx.get(`SELECT id FROM accounts WHERE id = ?${tx.dialect.forNoKeyUpdate}`, [accountId]);
      if ((await balanceIn(tx, accountId)) + amount < 0) throw new CutoutError('invalid_request', `A correction of ${amount} would take the balance of ${accountId} below 0.`, { param: 'amount' });
    }
    await tx.run(`INSERT INTO ledger (account_id, delta, reason, note, created_at) VALUES (?, ?, ?, ?, ?)`, [accountId, amount, amount > 0 ? 'purchase' : 'correction', opts.note ?? null, ctx.now()]);
    if (amount > 0) await tx.run("UPDATE accounts SET plan = 'paid' WHERE id = ? AND plan = 'free'", [accountId]);
    const balanceNow = await balanceIn(tx, accountId);
    const detail = { amount, reason: opts.note ?? null, balance: balanceNow, ...(accountOrKeyId !== accountId ? { via_key: accountOrKeyId } : {}) };
    return [{ accountId, balance: balanceNow }, await auditIn(ctx, tx, opts.audit, { action: 'credits.add', target: accountId, detail })] as const;
  });
  if (event) opts.audit?.onRecorded?.(event);
  return result;
}

export function balance(ctx: StoreContext, accountId: string): Promise<number> {
  return balanceIn(ctx.db, accountId);
}

export interface RecordRunOptions {
  /**
   * More writes that must commit or roll back with the run (a job's final state and its callback).
   * Called inside the transaction, after the charge, with what the caller will get back; throwing
   * rolls everything back (and deletes the result file).
   */
  within?: (tx: Queryable, outcome: RunCharge) => Promise<void>;
}

/** What a recorded run was charged, and the balance after (null for a local run without account). */
export interface RunCharge {
  creditsCharged: number;
  creditsRemaining: number | null;
}

/**
 * Records a removal: the charge (when `credits` is above 0), the run and the stored result in one
 * transaction. Throws insufficient_credits when the balance is below the charge; then, as on any
 * failure, nothing is written and the result file is deleted. `options.within` adds writes to the
 * same transaction.
 */
export async function recordRun(ctx: StoreContext, run: RunRecord, options: RecordRunOptions = {}): Promise<RunCharge> {
  if (!Number.isInteger(run.credits) || run.credits < 0) throw new Error(`recordRun: a charge is a whole number of credits, not ${run.credits}`);
  if (run.credits > 0 && run.accountId === null) throw new Error('recordRun: a charge needs an account');
  // The bytes are written whole before the transaction (a slow upload holds no lock), the row
  // inside it: a result that cannot be written fails the run before anything is charged
  // (ResultsUnavailable), and a transaction that fails removes the bytes it would have recorded.
  const staged = run.result ? await ctx.results.put(run.result.name ?? run.id, run.result.ext, run.result.data, run.result.contentType) : null;
  try {
    return await ctx.db.transaction(async (tx) => {
      const now = ctx.now();
      // The run and its result bytes first, the account's lock last: a large result is written
      // without holding up the other charges of the account across the fleet.
      await tx.run('INSERT INTO runs (id, account_id, key_id, channel, input, size, credits, ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)', [
        run.id, run.accountId, run.keyId, run.channel, run.input, run.size, run.credits, Math.round(run.ms), now,
      ]);
      if (run.result && staged) {
        const r = run.result;
        await insertResultIn(tx, staged, { jobId: run.id, contentType: r.contentType, width: r.width, height: r.height, createdAt: now, fields: r.fields ?? null });
      }
      if (run.credits > 0) {
        // The account row's lock serialises charges of one account across servers (PostgreSQL;
        // SQLite's writing transactions are serial anyway). NO KEY UPDATE: it does not wait for the
        // transactions that insert runs or jobs of the account (their foreign-key share lock).
        await tx.get(`SELECT id FROM accounts WHERE id = ?${tx.dialect.forNoKeyUpdate}`, [run.accountId]);
        if ((await balanceIn(tx, run.accountId as string)) < run.credits) throw new CutoutError('insufficient_credits');
        await tx.run('INSERT INTO ledger (account_id, delta, reason, ref, created_at) VALUES (?, ?, ?, ?, ?)', [run.accountId, -run.credits, 'charge', run.id, now]);
      }
      const outcome: RunCharge = { creditsCharged: run.credits, creditsRemaining: run.accountId === null ? null : await balanceIn(tx, run.accountId) };
      if (options.within) await options.within(tx, outcome);
      return outcome;
    });
  } catch (err) {
    if (staged?.location) await ctx.results.remove([staged.location]).catch(() => undefined);
    throw err;
  }
}

function monthStart(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

/** Balance, plan and this calendar month's use (UTC). `null` reports the local CLI runs. */
export async function account(ctx: StoreContext, accountId: string | null): Promise<AccountInfo> {
  // Reads only: each statement is queued on its own, no write lock is taken.
  const tx: Queryable = ctx.db;
  const since = monthStart(ctx.now());
  const used = await tx.get<{ credits: number | null; requests: number }>(
    'SELECT SUM(credits) AS credits, COUNT(*) AS requests FROM runs WHERE account_id IS NOT DISTINCT FROM ? AND created_at >= ?', [accountId, since],
  );
  const month = { creditsUsedThisMonth: used?.credits ?? 0, requestsThisMonth: used?.requests ?? 0 };
  if (accountId === null) return { accountId: null, balance: 0, plan: 'local', test: false, ...month };
  const row = await tx.get<{ plan: Plan; test: number }>('SELECT plan, test FROM accounts WHERE id = ?', [accountId]);
  if (!row) throw new CutoutError('invalid_request', `No account with id ${JSON.stringify(accountId)}`);
  return { accountId, balance: await balanceIn(tx, accountId), plan: row.plan, test: row.test === 1, ...month };
}

/** Credits and requests per UTC day for the last 30 days (today included), newest first, empty days as zeros. */
export async function usage(ctx: StoreContext, accountId: string | null): Promise<UsageDay[]> {
  const today = new Date(ctx.now());
  const todayStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate());
  const since = todayStart - (LIMITS.usageDays - 1) * 86_400_000;
  // Whole UTC days since the epoch by integer division: the same on both engines.
  const rows = await ctx.db.all<{ day: number; credits: number; requests: number }>(
    `SELECT created_at / 86400000 AS day, SUM(credits) AS credits, COUNT(*) AS requests
       FROM runs WHERE account_id IS NOT DISTINCT FROM ? AND created_at >= ? GROUP BY created_at / 86400000`,
    [accountId, since],
  );
  const byDay = new Map(rows.map((r) => [new Date(Number(r.day) * 86_400_000).toISOString().slice(0, 10), r]));
  return Array.from({ length: LIMITS.usageDays }, (_, i) => {
    const date = new Date(todayStart - i * 86_400_000).toISOString().slice(0, 10);
    const r = byDay.get(date);
    return { date, credits: r?.credits ?? 0, requests: r?.requests ?? 0 };
  });
}

/** Resolves an account id or key id to its account id (for `--key`/`credits add` style inputs). */
export function resolveAccount(ctx: StoreContext, accountOrKeyId: string): Promise<string> {
  return accountOf(ctx.db, accountOrKeyId);
}

/** The API keys (store.keys). */
export function keysOf(ctx: StoreContext) {
  return Object.freeze({
    create: boundTo(ctx, createKey),
    list: boundTo(ctx, listKeys),
    page: boundTo(ctx, pageKeys),
    get: boundTo(ctx, getKey),
    update: boundTo(ctx, updateKey),
    revoke: boundTo(ctx, revokeKey),
    authenticate: boundTo(ctx, authenticate),
  });
}
export type KeyStore = ReturnType<typeof keysOf>;

/** Accounts, credits and the runs charged to them (store.ledger). */
export function ledgerOf(ctx: StoreContext) {
  return Object.freeze({
    addCredits: boundTo(ctx, addCredits),
    balance: boundTo(ctx, balance),
    resolveAccount: boundTo(ctx, resolveAccount),
    recordRun: boundTo(ctx, recordRun),
    account: boundTo(ctx, account),
    usage: boundTo(ctx, usage),
    recentRuns: boundTo(ctx, recentRuns),
    marketplaceAccount: boundTo(ctx, marketplaceAccount),
  });
}
export type LedgerStore = ReturnType<typeof ledgerOf>;
