/**
 * GET /api/v1/results/{job_id}: the stored result, without authentication. The id is a random
 * UUID v4 and acts as the capability; anything else is refused before the database is asked.
 */
import type { ServerResponse } from 'node:http';
import { CutoutError } from '../errors.js';
import { errorBody, sendBytes, sendJson } from './http.js';
import type { ServerContext } from './context.js';

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
  const stored = await ctx.store.getResult(jobId.toLowerCase(), ttl);
  const data = stored?.data ?? null;
  if (!stored || !data) throw new CutoutError('not_found', `No result with id ${jobId}, or it has expired (results are kept ${ttl} s).`);
  const secondsLeft = Math.max(0, Math.floor((stored.createdAt + ttl * 1000 - Date.now()) / 1000));
  sendBytes(res, 200, data, stored.contentType, { 'Cache-Control': `private, max-age=${secondsLeft}` });
}
