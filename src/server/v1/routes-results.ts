/**
 * GET /api/v1/results/{job_id}: the stored result, without authentication. The id is a random
 * UUID v4 and acts as the capability; anything else is refused before the database is asked.
 *
 * The bytes are streamed from wherever the store keeps them (files, the database in slices, an
 * object store), never held whole. With `--results-redirect` and an object store, the answer is
 * a 302 to a presigned URL instead, valid until the result expires, but at most 7 days (SigV4's
 * cap): each GET signs a new one, so a longer --result-ttl only means asking the API again.
 * Where result bytes cannot be reached, 503 with Retry-After (ResultsUnavailable).
 */
import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { CutoutError } from '../../errors.js';
import { resultHeaders } from '../../result-fields.js';
import type { ResultRow, Store } from '../../store/db.js';
import { errorBody, sendJson } from '../http.js';
import type { ServerContext } from '../context.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

export function isUuidV4(value: string): boolean {
  return UUID_V4.test(value);
}

/**
 * The 422 validation answer for a malformed path id. It carries both shapes of api-spec part 7:
 * `detail` (the validation shape) and `error` (the shape every non-2xx answer has).
 */
export function sendInvalidJobId(res: ServerResponse, value: string): void {
  const error = new CutoutError('invalid_request', 'job_id must be a UUID v4.', { status: 422 });
  sendJson(res, 422, {
    ...errorBody(res, error),
    detail: [{ loc: ['path', 'job_id'], msg: `Input should be a valid UUID v4, received ${JSON.stringify(value.slice(0, 64))}`, type: 'uuid_parsing' }],
  });
}

export async function handleResult(ctx: Pick<ServerContext, 'config' | 'store'>, jobId: string, res: ServerResponse): Promise<void> {
  if (!isUuidV4(jobId)) return sendInvalidJobId(res, jobId);
  const ttl = ctx.config.resultTtlSeconds;
  const notFound = () => new CutoutError('not_found', `No result with id ${jobId}, or it has expired (results are kept ${ttl} s).`);
  const row = await ctx.store.results.find(jobId.toLowerCase(), ttl);
  if (!row) throw notFound();
  const secondsLeft = Math.max(0, Math.floor((row.createdAt + ttl * 1000 - Date.now()) / 1000));
  if (ctx.config.resultsRedirect) {
    const url = await ctx.store.results.presign(row, ttl);
    if (url) {
      // The signed URL itself must not be cached past its own expiry, nor shared.
      res.writeHead(302, { Location: url, 'Cache-Control': 'private, no-store' });
      res.end();
      return;
    }
  }
  // What the result says of itself travels with it as v1's headers (X-Cutout-Confidence), as on the sync answer.
  const headers = { 'Cache-Control': `private, max-age=${secondsLeft}`, ...resultHeaders(row.fields, 'v1') };
  if (!(await sendStoredResult(ctx.store, row, res, headers))) throw notFound();
}

/**
 * Streams a stored result as a 200 with `headers`. False when its bytes are gone (purged between
 * the lookup and the read): nothing was sent. A failure mid-stream ends the connection (the
 * length announced is not reached, so no client takes a cut result for a whole one).
 */
export async function sendStoredResult(store: Store, row: ResultRow, res: ServerResponse, headers: Record<string, string> = {}): Promise<boolean> {
  const opened = await store.results.open(row);
  if (!opened) return false;
  res.writeHead(200, {
    ...headers,
    'Content-Type': row.contentType,
    ...(opened.size !== null ? { 'Content-Length': String(opened.size) } : {}),
    'X-Content-Type-Options': 'nosniff',
  });
  try {
    await pipeline(opened.body, res);
  } catch {
    res.destroy();
  }
  return true;
}
