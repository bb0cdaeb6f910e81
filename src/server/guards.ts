/**
 * What stands before every authenticated handler: who the caller is (an API key, or a marketplace
 * user vouched for by the proxy secret), the per-key sliding-window rate limit and its headers,
 * and Idempotency-Key replay.
 */
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CutoutError } from '../errors.js';
import { IdempotencyClaimLost, StoreUnavailable, type RateDecision, type Store } from '../store/db.js';
import type { IdempotencyRef } from '../store/idempotency.js';
import type { Queryable } from '../store/db.js';

/** How often a repeat polls the store for a first request running in another process. */
const IDEMPOTENCY_POLL_MS = 200;
/** A release the store did not take (it was not answering) is tried again this often, this many times. */
const RELEASE_RETRY_MS = 2_000;
const RELEASE_ATTEMPTS = 20;

export interface Caller {
  accountId: string;
  /** null for a marketplace caller. */
  keyId: string | null;
  /** A cut_test_ key: never charged, results capped to preview size. */
  test: boolean;
  channel: 'key' | 'marketplace';
  /** What the rate limit counts against: the key, or the marketplace user. */
  rateKey: string;
  /** The key's own requests per minute (its `rate_limit`), in place of the API's; absent or null: the API's. */
  rateLimit?: number | null;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Compares two secrets in constant time; hashing first makes the lengths equal. */
export function secretsEqual(a: string, b: string): boolean {
  const ha = crypto.createHash('sha256').update(a).digest();
  const hb = crypto.createHash('sha256').update(b).digest();
  return crypto.timingSafeEqual(ha, hb);
}

const MAX_MARKETPLACE_USER = 200;

/**
 * v1's authentication: identifies the caller or throws 401 invalid_api_key. Marketplace headers count only when the
 * server has a marketplace secret and X-Marketplace-Proxy-Secret matches it; otherwise they are
 * ignored and the Authorization header decides.
 */
export async function identify(req: IncomingMessage, store: Store, marketplaceSecret: string | null): Promise<Caller> {
  const proxySecret = header(req, 'x-marketplace-proxy-secret');
  if (marketplaceSecret !== null && proxySecret !== undefined && secretsEqual(proxySecret, marketplaceSecret)) {
    const user = header(req, 'x-marketplace-user')?.trim();
    if (!user || user.length > MAX_MARKETPLACE_USER) {
      throw new CutoutError('invalid_api_key', `A marketplace call needs X-Marketplace-User (1 to ${MAX_MARKETPLACE_USER} characters).`);
    }
    const accountId = await store.ledger.marketplaceAccount(user);
    return { accountId, keyId: null, test: false, channel: 'marketplace', rateKey: `marketplace:${user}` };
  }
  // RFC 9110: a 401 names the scheme it wants.
  const challenge = { headers: { 'WWW-Authenticate': 'Bearer realm="cutout"' } };
  const authorization = header(req, 'authorization');
  if (!authorization) {
    const other = header(req, 'x-api-key') ? ' (the v1 API does not read X-Api-Key; remove.bg\'s and rembg\'s routes do)' : '';
    throw new CutoutError('invalid_api_key', `Missing Authorization: Bearer <API_KEY> header${other}.`, { ...challenge, reason: 'missing_key' });
  }
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  // An expired key throws its own 401 (reason key_expired), with the challenge as every 401 here.
  const auth = match ? await store.keys.authenticate(match[1]).catch((err: unknown) => {
    throw err instanceof CutoutError && err.reason === 'key_expired' ? new CutoutError(err.code, err.message, { ...challenge, reason: err.reason }) : err;
  }) : null;
  if (!auth && match) {
    // The first hour's 401: a key made by another user (another ~/.cutout) or for another store.
    // The store's kind, not its path or URL: a client is not told where the server keeps things.
    throw new CutoutError('invalid_api_key', `No key in this server's store (${store.kind}) matches: unknown or revoked. A key made by \`cutout keys create\` with another data directory or --store is not known here; the server prints its own at start.`, challenge);
  }
  if (!auth) throw new CutoutError('invalid_api_key', undefined, challenge);
  return { accountId: auth.accountId, keyId: auth.keyId, test: auth.test, channel: 'key', rateKey: `key:${auth.keyId}`, rateLimit: auth.rateLimit };
}

/**
 * The per-key sliding-window rate limit (see store/rate-limit.ts): counted in the store, so the
 * servers of a fleet share one window per key, atomically per request.
 */
/** What the rate limit needs of the store. */
export type RateLimitStore = Pick<Store, 'rateLimits'>;

export class RateLimiter {
  /** `scope`: prefixed to every key, so that a limiter of another scope counts in windows of its own. */
  constructor(private readonly store: RateLimitStore, readonly limit: number, readonly windowMs = 60_000, private readonly scope = '') {}

  /** Counts one request of `key` against `limit` (a key's own `rate_limit`), default this limiter's. */
  hit(key: string, limit: number = this.limit): Promise<RateDecision> {
    return this.store.rateLimits.hit(this.scope ? `${this.scope}/${key}` : key, limit, this.windowMs);
  }

  /** A limiter on the same store with `limit` per window, counting each key in a window of `scope`'s own. */
  scoped(scope: string, limit: number): RateLimiter {
    return new RateLimiter(this.store, limit, this.windowMs, scope);
  }

  /** Forgets keys with no request in the window (run periodically). */
  async sweep(): Promise<void> {
    await this.store.rateLimits.purge(this.windowMs);
  }
}

export function rateLimitHeaders(d: RateDecision): Record<string, string> {
  return { 'X-RateLimit-Limit': String(d.limit), 'X-RateLimit-Remaining': String(d.remaining), 'X-RateLimit-Reset': String(d.reset) };
}

/**
 * Authenticates the request (by the API's own `authenticate`: v1's is identify) and counts it; sets the rate-limit headers on the response, so every
 * authenticated answer (errors included) carries them. Throws invalid_api_key or rate_limited.
 */
export async function guard(
  req: IncomingMessage, res: ServerResponse, deps: { authenticate: (req: IncomingMessage) => Promise<Caller>; limiter: RateLimiter },
): Promise<Caller> {
  const caller = await deps.authenticate(req);
  // A key's own rate_limit wins over the API's and the server's, on every door (the same window).
  const decision = await deps.limiter.hit(caller.rateKey, caller.rateLimit ?? undefined);
  for (const [name, value] of Object.entries(rateLimitHeaders(decision))) res.setHeader(name, value);
  if (!decision.allowed) {
    throw new CutoutError('rate_limited', `Over ${decision.limit} requests per minute for this key; retry in ${decision.retryAfter} s.`, {
      headers: { 'Retry-After': String(decision.retryAfter) },
    });
  }
  return caller;
}

/**
 * Runs `work` at most once per (account, endpoint, Idempotency-Key) within the window. A repeat
 * with the same fingerprint gets the stored value (`replayed`); a repeat while the first is still
 * running waits for it (in this process, or polling the store when another server on the same
 * store runs it); a different fingerprint is refused. A failure releases the key,
 * since nothing was charged.
 */
/** Marks the key done with `value`, inside the transaction `tx` of the work's effect. */
export type Seal<T> = (tx: Queryable, value: T) => Promise<void>;

export class Idempotency {
  private readonly inflight = new Map<string, Promise<unknown>>();

  /** `maxWaitMs`: longer than any request can hold its key; see awaitOtherProcess. */
  constructor(
    private readonly store: Store,
    private readonly ttlSeconds: number,
    private readonly maxWaitMs: number,
  ) {}

  /**
   * Waits while another server on the same store holds the key (polled in the store). A claim
   * whose server is gone (a dead pid on SQLite, a stopped heartbeat on PostgreSQL) is taken over
   * by the next claim. No request holds a key longer than `maxWaitMs`, so a claim older than that
   * is taken over too.
   */
  private async awaitOtherProcess(ref: IdempotencyRef): Promise<void> {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, IDEMPOTENCY_POLL_MS));
      const pending = await this.store.idempotency.pending(ref);
      if (pending === null || !pending.ownerAlive) return;
      if (pending.ageMs > this.maxWaitMs) {
        // Only the claim seen: a newer one, made since by any server, is a live request's.
        await this.store.idempotency.releaseStale(ref, pending);
        return;
      }
    }
  }

  /**
   * Releases our pending claim in the background, tried again while the store does not answer, so
   * a retry of the key after the store is back need not wait for the claim to go stale. (If the
   * failure hit the commit and it went through, the key is done and the release changes nothing.)
   */
  private releaseSoon(ref: IdempotencyRef, attempt = 1): void {
    this.store.idempotency.release(ref).catch(() => {
      if (attempt < RELEASE_ATTEMPTS) setTimeout(() => this.releaseSoon(ref, attempt + 1), RELEASE_RETRY_MS).unref();
    });
  }

  /**
   * `work` gets `seal`, to call inside the transaction that commits its effect (the charge, the
   * job rows) with the value to replay: the key is done in the same commit, so no crash can leave
   * a charge whose key a retry could claim again.
   */
  async run<T>(caller: Caller, endpoint: string, key: string | undefined, fingerprint: string, work: (seal: Seal<T>) => Promise<T>): Promise<{ value: T; replayed: boolean }> {
    if (key === undefined) return { value: await work(async () => undefined), replayed: false };
    if (key.length < 1 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
      throw new CutoutError('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters.');
    }
    const ref = { accountId: caller.accountId, endpoint, key };
    const slot = JSON.stringify([ref.accountId, endpoint, key]);
    for (;;) {
      const claim = await this.store.idempotency.claim(ref, fingerprint, this.ttlSeconds);
      if (claim.state === 'done') return { value: claim.response as T, replayed: true };
      if (claim.state === 'mismatch') {
        throw new CutoutError('invalid_request', 'This Idempotency-Key was already used with different parameters or a different image.', { status: 422 });
      }
      if (claim.state === 'pending') {
        const running = this.inflight.get(slot);
        if (running) await running.catch(() => undefined);
        else await this.awaitOtherProcess(ref);
        continue; // the first request has finished: replay it, or claim the key if it failed
      }
      const promise = (async () => {
        try {
          let sealed = false;
          const value = await work(async (tx, answer) => {
            await this.store.idempotency.complete(ref, answer, tx);
            sealed = true;
          });
          // Work with no transaction of its own to seal in is marked done now.
          if (!sealed) await this.store.idempotency.complete(ref, value);
          return value;
        } catch (err) {
          // A lost claim is another server's now (and our charge rolled back with the seal). A
          // store that is not answering gets the release later: the caller's 503 does not wait
          // for it (a call that needs a frozen store fails within 15 s, never more).
          if (err instanceof StoreUnavailable) this.releaseSoon(ref);
          else if (!(err instanceof IdempotencyClaimLost)) await this.store.idempotency.release(ref);
          throw err;
        } finally {
          this.inflight.delete(slot);
        }
      })();
      this.inflight.set(slot, promise);
      try {
        return { value: await promise, replayed: false };
      } catch (err) {
        // Our heartbeat had stopped and another server took the key over: nothing was charged
        // here; wait for that server's answer and replay it, as for any repeat of the key.
        if (err instanceof IdempotencyClaimLost) continue;
        throw err;
      }
    }
  }
}

/** A stable digest of the parts of a request that define its result. */
export function fingerprint(parts: unknown): string {
  return crypto.createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}
