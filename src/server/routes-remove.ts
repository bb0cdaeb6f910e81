/**
 * POST /api/v1/remove: the sync removal. Order of checks: who (401), how often (429), what (400),
 * can they pay (402), then the work in a pool slot under the hard timeout, then the charge and
 * the stored result in one transaction. The timeout and the commit exclude each other: once the
 * timeout has answered 504 nothing is charged even if the model finishes later, and once the
 * commit has begun the timeout no longer fires.
 */
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { colorToHex, forTestKey, type ImageOptions } from '../options.js';
import { fetchImageUrl } from '../net/fetch-url.js';
import { fingerprint, guard, type Caller, type Seal } from './guards.js';
import { readImageRequest, sendBytes, sendJson, wantsJson, type ImageSource } from './http.js';
import { sendStoredResult } from './routes-results.js';
import type { AppContext } from './app.js';

/** What a sync removal produced; stored as the idempotent response and replayed as is. */
export interface RemoveOutcome {
  id: string;
  url: string;
  width: number;
  height: number;
  credits_charged: number;
  credits_remaining: number;
  processing_ms: number;
  content_type: string;
  /** The size served (`auto` resolved), for X-Cutout-Size; absent in outcomes stored before it was kept. */
  size?: 'preview' | 'full';
}

/** Marketplace callers are billed by the marketplace and test keys never: neither touches the ledger. */
export function paysWithCredits(caller: Caller): boolean {
  return caller.channel === 'key' && !caller.test;
}

function timeoutError(ms: number): CutoutError {
  return new CutoutError('processing_failed', `Processing took longer than the ${ms / 1000} s sync limit; nothing was charged. Large images go through POST /api/v1/jobs.`, { status: 504 });
}

/**
 * Runs `work` under a hard deadline. `work` gets the abort signal and `commit`: the final step
 * (charge and store) must run inside `commit`, which refuses once the deadline has passed and,
 * once started, stops the deadline from firing.
 */
function withDeadline<T>(ms: number, work: (signal: AbortSignal, commit: <R>(step: () => Promise<R>) => Promise<R>) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let committing = false;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      if (committing) return;
      const err = timeoutError(ms);
      controller.abort(err);
      reject(err);
    }, ms);
  });
  expired.catch(() => undefined);
  const commit = <R>(step: () => Promise<R>): Promise<R> => {
    if (controller.signal.aborted) return Promise.reject(controller.signal.reason);
    committing = true;
    clearTimeout(timer);
    return step();
  };
  const done = work(controller.signal, commit);
  done.catch(() => undefined); // after a timeout its late failure has nobody to tell
  return Promise.race([done, expired]).finally(() => clearTimeout(timer));
}

async function insufficientUnlessFunded(ctx: AppContext, caller: Caller): Promise<void> {
  if ((await ctx.store.balance(caller.accountId)) < 1) throw new CutoutError('insufficient_credits');
}

/**
 * `seal`: marks the Idempotency-Key done with the outcome, inside the charge's transaction.
 * `made`: told the result's bytes once they are committed, so the answer needs no read back.
 */
async function removeOnce(
  ctx: AppContext, caller: Caller, options: ImageOptions, source: ImageSource, seal: Seal<RemoveOutcome>, made: (data: Buffer) => void,
): Promise<RemoveOutcome> {
  const { config, store, pool, pipeline } = ctx;
  const pays = paysWithCredits(caller);
  // Refuse before any work when the answer is already known.
  if (pays && options.size === 'full') await insufficientUnlessFunded(ctx, caller);

  return withDeadline(config.syncTimeoutMs, async (signal, commit) => {
    const bytes = source.kind === 'image_url'
      ? await fetchImageUrl(source.url, { allowPrivateNetwork: config.allowPrivateNetwork, timeoutMs: Math.min(LIMITS.fetchTimeoutMs, config.syncTimeoutMs) })
      : source.bytes;
    if (signal.aborted) throw signal.reason;
    if (pays && options.size === 'auto') {
      // `auto` is full up to 4 MP: read the header to know whether it will cost a credit.
      const probe = await pipeline.probeImage(bytes);
      if (probe.width * probe.height <= LIMITS.autoFullMaxPixels) await insufficientUnlessFunded(ctx, caller);
    }
    const result = await pool.run(
      () => pipeline.removeBackground(bytes, { ...options, maxFullPixels: LIMITS.maxSyncFullPixels }, { signal }),
      { signal },
    );
    const id = crypto.randomUUID();
    const credits = pays && result.resolvedSize === 'full' ? 1 : 0;
    return commit(async () => {
      let outcome!: RemoveOutcome;
      await store.recordRun(
        {
          id, accountId: caller.accountId, keyId: caller.keyId, channel: 'api', input: source.description,
          size: result.resolvedSize, credits, ms: result.ms,
          result: { data: result.data, ext: result.format, contentType: result.contentType, width: result.width, height: result.height },
        },
        {
          within: async (tx, charged) => {
            outcome = {
              id,
              url: `${ctx.baseUrl}/api/v1/results/${id}`,
              width: result.width,
              height: result.height,
              credits_charged: charged.creditsCharged,
              credits_remaining: charged.creditsRemaining ?? 0,
              processing_ms: Math.round(result.ms),
              content_type: result.contentType,
              size: result.resolvedSize,
            };
            await seal(tx, outcome);
          },
        },
      );
      made(result.data);
      return outcome;
    });
  });
}

export async function handleRemove(ctx: AppContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const caller = await guard(req, res, ctx);
  const { options: asked, source } = await readImageRequest(req);
  // Test keys exercise the whole flow for free, so their results are previews whatever was asked.
  const options = forTestKey(asked, caller.test);
  const idempotencyKey = req.headers['idempotency-key'];
  const requestPrint = fingerprint({
    options: { ...options, bgColor: colorToHex(options.bgColor) },
    source: source.kind === 'image_url' ? source.url : crypto.createHash('sha256').update(source.bytes).digest('hex'),
  });
  // The bytes just committed are answered as they are; a replay reads them back from the store.
  let made: Buffer | null = null;
  const { value: outcome, replayed } = await ctx.idempotency.run<RemoveOutcome>(
    caller, 'remove', Array.isArray(idempotencyKey) ? idempotencyKey[0] : idempotencyKey, requestPrint,
    (seal) => removeOnce(ctx, caller, options, source, seal, (data) => { made = data; }),
  );

  const headers: Record<string, string> = {
    'X-Job-Id': outcome.id,
    'X-Credits-Charged': String(outcome.credits_charged),
    'X-Credits-Remaining': String(outcome.credits_remaining),
  };
  // Which size was served: a request without `size` gets a preview (api-spec 2.1), unlike the CLI.
  if (outcome.size) headers['X-Cutout-Size'] = outcome.size;
  if (replayed) headers['Idempotent-Replayed'] = 'true';
  if (wantsJson(req)) {
    const { content_type: _type, size: _size, ...metadata } = outcome;
    sendJson(res, 200, metadata, headers);
    return;
  }
  if (made && !replayed) return sendBytes(res, 200, made, outcome.content_type, headers);
  const row = await ctx.store.findResult(outcome.id, ctx.config.resultTtlSeconds);
  if (!row || !(await sendStoredResult(ctx.store, row, res, headers))) throw new CutoutError('not_found', 'The stored result of this Idempotency-Key has expired.');
}
