/**
 * The HTTP plumbing of the upstream client (client.ts): a bound on requests in flight, a body read
 * with a cap, and the one-line reasons of failures for messages.
 */
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

/** A response's body, or processing_failed once it passes `limit` bytes (the rest is not read). */
export async function readCapped(res: Response, limit: number): Promise<Buffer> {
  const tooLarge = (size: string) => new CutoutError('processing_failed', `The inference server's answer is ${size}: over the limit of ${formatMB(limit)}, what a matte of this size can take`);
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge(formatMB(declared));
  }
  if (!res.body) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(`longer than ${formatMB(limit)}`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
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
