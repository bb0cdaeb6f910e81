/**
 * The HTTP plumbing of the upstream client (client.ts): a bound on requests in flight, a body read
 * with a cap, and the one-line reasons of failures for messages.
 */
import { readCapped as readStreamCapped } from '../net/capped-read.js';
import { CutoutError } from '../errors.js';
import { formatMB } from '../limits.js';

/** Why a fetch failed, in a few words: "timed out", "ECONNREFUSED", ... */
export function networkReason(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'timed out';
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

/** A counting semaphore: at most `size` holders. */
export class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  constructor(size: number) {
    this.free = size;
  }
  async take(): Promise<() => void> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}

/**
 * A response's body, or an error once it passes `limit` bytes (the rest is not read): by
 * default processing_failed for an inference answer; `tooLarge` makes another one.
 */
export async function readCapped(res: Response, limit: number, tooLarge?: (size: string) => Error): Promise<Buffer> {
  const fail = tooLarge ?? ((size: string) => new CutoutError('processing_failed', `The inference server's answer is ${size}: over the limit of ${formatMB(limit)}, what a matte of this size can take`));
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    await res.body?.cancel().catch(() => undefined);
    throw fail(formatMB(declared));
  }
  if (!res.body) return Buffer.alloc(0);
  // The body is cancelled once past the limit (net/capped-read.ts).
  return readStreamCapped(res.body, limit, () => fail(`longer than ${formatMB(limit)}`));
}

/** A wait of `ms` that ends early (rejecting with its reason) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A Retry-After header in ms (delta-seconds or an HTTP date), or null when absent or unreadable.
 */
export function retryAfterMs(value: string | null, now = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/**
 * The wait before retry number `attempt` (1-based) of a busy answer: a Retry-After is honoured
 * (up to `maxMs`) with up to half of it again as jitter, so that the clients a busy server sent
 * away do not all come back at once; without one, full jitter over a doubling bound.
 */
export function busyDelayMs(attempt: number, retryAfter: number | null, firstMs: number, maxMs: number, random = Math.random): number {
  if (retryAfter !== null) {
    const base = Math.min(retryAfter, maxMs);
    return base + random() * base * 0.5;
  }
  const bound = Math.min(maxMs, firstMs * 2 ** (attempt - 1));
  return firstMs / 2 + random() * (bound - firstMs / 2);
}

/** The `{"error": "..."}` of a protocol error body, or its first characters. */
export function errorText(bytes: Buffer): string {
  const text = bytes.subarray(0, 2000).toString('utf8');
  try {
    const e = (JSON.parse(text) as { error?: unknown }).error;
    if (typeof e === 'string') return e;
  } catch {
    // not JSON
  }
  return text.slice(0, 200) || '(empty body)';
}
