/**
 * POST /api/v1/remove: the sync removal. Order of checks: who (401), how often (429), what (400),
 * can they pay (402), then the work in a pool slot under the hard timeout, then the charge and
 * the stored result in one transaction. The timeout and the commit exclude each other: once the
 * timeout has answered 504 nothing is charged even if the model finishes later, and once the
 * commit has begun the timeout no longer fires.
 */
import { runSyncRemoval } from '../sync-removal.js';
import { resultFieldsOf, resultHeaders, type ResultFields } from '../../result-fields.js';
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CutoutError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import { colorToHex, forTestKey, type ImageOptions } from '../../options.js';
import { fetchImageUrl } from '../../net/fetch-url.js';
import type { RemoveRequest } from '../../pipeline/types.js';
import type { ServerContext } from '../context.js';
import { fingerprint, type Caller, type Seal } from '../guards.js';
import { sendBytes, sendJson, wantsJson } from '../http.js';
import { readImageRequest, type ImageSource } from './v1-params.js';
import { sendStoredResult } from './routes-results.js';

/** The parts of the server the sync route uses. */
type RemoveContext = Pick<ServerContext, 'config' | 'pool' | 'removals' | 'idempotency' | 'store' | 'baseUrl'>;

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
  /** What the result says of itself (result-fields.ts), answered as v1's headers; absent in older outcomes, partial in some. */
  fields?: Partial<ResultFields>;
}

/**
 * `seal`: marks the Idempotency-Key done with the outcome, inside the charge's transaction.
 * `made`: told the result's bytes once they are committed, so the answer needs no read back.
 */
function removeOnce(
  ctx: RemoveContext, res: ServerResponse, caller: Caller, options: ImageOptions, given: { image: ImageSource; background?: Buffer }, seal: Seal<RemoveOutcome>, made: (data: Buffer) => void,
): Promise<RemoveOutcome> {
  const { image: source, background: uploaded } = given;
  const { config } = ctx;
  const id = crypto.randomUUID();
  let outcome!: RemoveOutcome;
  const fetching = { allowPrivateNetwork: config.allowPrivateNetwork, timeoutMs: Math.min(LIMITS.fetchTimeoutMs, config.syncTimeoutMs) };
  const request: RemoveRequest = { ...options, maxFullPixels: LIMITS.maxSyncFullPixels, maxAnimationPixels: LIMITS.maxSyncAnimationPixels };
  return runSyncRemoval(ctx, res, {
    id,
    caller,
    request,
    deadlineMs: config.syncTimeoutMs,
    // The image and the background picture (bg_image_url) are fetched side by side; the picture's
    // bytes (fetched, or uploaded as bg_image_file) come back with the image. The work's signal
    // stops both downloads when the client hangs up or the deadline passes.
    input: async (signal) => {
      const [image, background] = await Promise.all([
        source.kind === 'image_url' ? fetchImageUrl(source.url, { ...fetching, signal }) : source.bytes,
        options.bgImage ? fetchImageUrl(options.bgImage, { ...fetching, label: 'bg_image_url', signal }) : uploaded,
      ]);
      return { image, background };
    },
    description: source.description,
    storeResult: {},
    within: async (tx, charged, result) => {
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
        fields: resultFieldsOf(result),
      };
      await seal(tx, outcome);
    },
  }).then(({ result }) => {
    made(result.data);
    return outcome;
  });
}

export async function handleRemove(ctx: RemoveContext, req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<void> {
  const { options: asked, source, background } = await readImageRequest(req, { backgroundFile: true });
  // Test keys exercise the whole flow for free, so their results are previews whatever was asked.
  const options = forTestKey(asked, caller.test);
  const idempotencyKey = req.headers['idempotency-key'];
  const requestPrint = fingerprint({
    options: { ...options, bgColor: colorToHex(options.bgColor) },
    source: source.kind === 'image_url' ? source.url : crypto.createHash('sha256').update(source.bytes).digest('hex'),
    ...(background ? { background: crypto.createHash('sha256').update(background).digest('hex') } : {}),
  });
  // The bytes just committed are answered as they are; a replay reads them back from the store.
  let made: Buffer | null = null;
  const { value: outcome, replayed } = await ctx.idempotency.run<RemoveOutcome>(
    caller, 'remove', Array.isArray(idempotencyKey) ? idempotencyKey[0] : idempotencyKey, requestPrint,
    (seal) => removeOnce(ctx, res, caller, options, { image: source, background }, seal, (data) => { made = data; }),
  );

  const headers: Record<string, string> = {
    'X-Job-Id': outcome.id,
    'X-Credits-Charged': String(outcome.credits_charged),
    'X-Credits-Remaining': String(outcome.credits_remaining),
    ...resultHeaders(outcome.fields, 'v1'),
  };
  // Which size was served: a request without `size` gets a preview (api-spec 2.1), unlike the CLI.
  if (outcome.size) headers['X-Cutout-Size'] = outcome.size;
  if (replayed) headers['Idempotent-Replayed'] = 'true';
  if (wantsJson(req)) {
    // The metadata of api-spec 2.2, exactly: the result's fields travel in the headers.
    const { content_type: _type, size: _size, fields: _fields, ...metadata } = outcome;
    sendJson(res, 200, metadata, headers);
    return;
  }
  if (made && !replayed) return sendBytes(res, 200, made, outcome.content_type, headers);
  const row = await ctx.store.results.find(outcome.id, ctx.config.resultTtlSeconds);
  if (!row || !(await sendStoredResult(ctx.store, row, res, headers))) throw new CutoutError('not_found', 'The stored result of this Idempotency-Key has expired.');
}
