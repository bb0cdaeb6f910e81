/**
 * rembg's server API (`rembg s`, docs/removebg.md "rembg's API") as a plugin: `GET /api/remove?url=`
 * and `POST /api/remove` (multipart, the image in `file`), with rembg's parameters where they map
 * to what cutout has, its answers (always `image/png`) and its error bodies (FastAPI's
 * `{"detail": ...}`; a bad parameter is a 422 with `loc`/`msg`/`type`). Keyed like every other
 * route (`Authorization: Bearer` or `X-Api-Key`), charged like v1 (a full-size result, 1 credit).
 * Its parameters are read in rembg-params.ts.
 */
import { resultFieldsOf, resultHeaders } from '../../result-fields.js';
import { dialectCors, dialectDeadlineMs, readUpload } from './dialect-kit.js';
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request } from 'polka';
import { CutoutError } from '../../errors.js';
import { fetchImageUrl } from '../../net/fetch-url.js';
import type { RemoveRequest } from '../../pipeline/types.js';
import { RembgValidationError, rembgRequest } from './rembg-params.js';
import type { ServerContext } from '../context.js';
import { identify, type Caller } from '../guards.js';
import { sendBytes, sendJson } from '../http.js';
import type { ApiPlugin } from '../plugin.js';
import { runSyncRemoval } from '../sync-removal.js';

export const REMBG_PREFIX = '/api/remove';

type RembgContext = Pick<ServerContext, 'config' | 'pool' | 'removals' | 'store' | 'marketplaceSecret'>;

function renderError(res: ServerResponse, err: CutoutError): void {
  if (err instanceof RembgValidationError) {
    sendJson(res, 422, { detail: [{ loc: [err.where, err.param], msg: err.message, type: err.type }] });
    return;
  }
  sendJson(res, err.status, { detail: err.message }, err.headers);
}

function query(req: Request): URLSearchParams {
  return new URL(req.url ?? '/', 'http://x').searchParams;
}

async function authenticate(ctx: RembgContext, req: IncomingMessage): Promise<Caller> {
  const apiKey = req.headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey.trim() && !req.headers.authorization) req.headers.authorization = `Bearer ${apiKey.trim()}`;
  return identify(req, ctx.store, ctx.marketplaceSecret);
}

async function removeAndAnswer(ctx: RembgContext, res: ServerResponse, caller: Caller, asked: RemoveRequest, input: Buffer | ((signal: AbortSignal) => Promise<Buffer>), description: string): Promise<void> {
  // A test key's results are previews, as on v1.
  // rembg's clients cannot name a quality: the server's configured one applies (CUTOUT_QUALITY).
  // A test key's preview, the slot, the deadline and a hang-up: the door policy's (sync-removal.ts).
  const { result } = await runSyncRemoval(ctx, res, {
    id: crypto.randomUUID(), caller, request: { ...asked, quality: ctx.config.quality }, input, description: `rembg ${description}`,
    deadlineMs: dialectDeadlineMs(ctx.config),
  });
  sendBytes(res, 200, result.data, 'image/png', resultHeaders(resultFieldsOf(result), 'rembg'));
}

async function handleGet(ctx: RembgContext, req: Request, res: ServerResponse, caller: Caller): Promise<void> {
  const q = query(req);
  const request = rembgRequest((name) => ({ value: q.get(name) ?? undefined, where: 'query' }));
  const url = q.get('url');
  if (!url) throw new RembgValidationError('query', 'url', 'Field required', 'missing');
  // The work's signal: a hang-up (or the deadline) ends the download too.
  const fetchIt = async (signal: AbortSignal) => {
    try {
      return await fetchImageUrl(url, { allowPrivateNetwork: ctx.config.allowPrivateNetwork, signal });
    } catch (err) {
      throw err instanceof CutoutError && err.code === 'invalid_request' ? new CutoutError('invalid_request', err.message.replace(/^image_url/, 'url')) : err;
    }
  };
  await removeAndAnswer(ctx, res, caller, request, fetchIt, `url ${new URL(url, 'http://x').host}`);
}

async function handlePost(ctx: RembgContext, req: Request, res: ServerResponse, caller: Caller): Promise<void> {
  const q = query(req);
  const { image: file, fields } = await readUpload(req, 'file', () => new RembgValidationError('body', 'file', 'Field required', 'missing'));
  const request = rembgRequest((name) => {
    const inBody = fields[name]?.[0];
    return inBody !== undefined ? { value: inBody, where: 'body' } : { value: q.get(name) ?? undefined, where: 'query' };
  });
  await removeAndAnswer(ctx, res, caller, request, file, 'upload');
}

export function rembgApi(ctx: RembgContext): ApiPlugin {
  return {
    name: 'rembg',
    prefix: REMBG_PREFIX,
    // rembg's server allows every origin without credentials (FastAPI's CORSMiddleware).
    cors: dialectCors('rembg'),
    authenticate: (req) => authenticate(ctx, req),
    renderError,
    notFound: () => new CutoutError('not_found', 'Not Found'),
    routes(api) {
      api.forCaller('get', '', (req, res, caller) => handleGet(ctx, req, res, caller));
      api.forCaller('post', '', (req, res, caller) => handlePost(ctx, req, res, caller));
    },
  };
}
