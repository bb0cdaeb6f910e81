/**
 * rembg's server API (`rembg s`, docs/removebg.md "rembg's API") as a plugin: `GET /api/remove?url=`
 * and `POST /api/remove` (multipart, the image in `file`), with rembg's parameters where they map
 * to what cutout has, its answers (always `image/png`) and its error bodies (FastAPI's
 * `{"detail": ...}`; a bad parameter is a 422 with `loc`/`msg`/`type`). Keyed like every other
 * route (`Authorization: Bearer` or `X-Api-Key`), charged like v1 (a full-size result, 1 credit).
 */
import { resultFieldsOf, resultHeaders } from '../result-fields.js';
import { dialectCors, dialectDeadlineMs, readUpload } from './dialect-kit.js';
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request } from 'polka';
import { CutoutError } from '../errors.js';
import { fetchImageUrl } from '../net/fetch-url.js';
import { OptionError, type Rgb } from '../options.js';
import type { RemoveRequest } from '../pipeline/types.js';
import type { ServerContext } from './context.js';
import { identify, type Caller } from './guards.js';
import { sendBytes, sendJson } from './http.js';
import type { ApiPlugin } from './plugin.js';
import { runSyncRemoval } from './sync-removal.js';

export const REMBG_PREFIX = '/api/remove';

/** rembg's session names (R1 `rembg/sessions/*.py`): each runs cutout's model here. */
export const REMBG_MODELS = [
  'u2net', 'u2netp', 'u2net_human_seg', 'u2net_cloth_seg', 'u2net_custom', 'silueta', 'isnet-general-use', 'isnet-anime',
  'dis_custom', 'sam', 'birefnet-general', 'birefnet-general-lite', 'birefnet-portrait', 'birefnet-dis', 'birefnet-hrsod',
  'birefnet-cod', 'birefnet-massive', 'bria-rmbg', 'ben_custom',
] as const;

type RembgContext = Pick<ServerContext, 'config' | 'pool' | 'removals' | 'store' | 'marketplaceSecret'>;

/** A FastAPI validation failure: 422 `{"detail": [{loc, msg, type}]}`. */
class RembgValidationError extends OptionError {
  constructor(readonly where: 'query' | 'body', param: string, msg: string, readonly type = 'value_error') {
    super(param, msg);
  }
}

function renderError(res: ServerResponse, err: CutoutError): void {
  if (err instanceof RembgValidationError) {
    sendJson(res, 422, { detail: [{ loc: [err.where, err.param], msg: err.message, type: err.type }] });
    return;
  }
  sendJson(res, err.status, { detail: err.message }, err.headers);
}

function bool(where: 'query' | 'body', name: string, value: string | undefined): boolean | undefined {
  if (value === undefined || value === '') return undefined;
  const v = value.trim().toLowerCase();
  if (['true', '1', 'yes', 'on', 't', 'y'].includes(v)) return true;
  if (['false', '0', 'no', 'off', 'f', 'n'].includes(v)) return false;
  throw new RembgValidationError(where, name, 'Input should be a valid boolean, unable to interpret input', 'bool_parsing');
}

function int(where: 'query' | 'body', name: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new RembgValidationError(where, name, 'Input should be a valid integer, unable to parse string as an integer', 'int_parsing');
  if (n < min) throw new RembgValidationError(where, name, `Input should be greater than or equal to ${min}`, 'greater_than_equal');
  if (n > max) throw new RembgValidationError(where, name, `Input should be less than or equal to ${max}`, 'less_than_equal');
  return n;
}

/** `bgc`: "R,G,B,A", each 0..255, as rembg parses it (a tuple of ints). */
function backgroundColor(value: string | undefined): Rgb | null {
  if (value === undefined || value === '') return null;
  const parts = value.split(',').map((p) => Number(p.trim()));
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) {
    throw new RembgValidationError('query', 'bgc', 'Expected four integers from 0 to 255: "R,G,B,A"');
  }
  const [r, g, b, a] = parts;
  if (a === 0) return null;
  return a === 255 ? { r, g, b } : { r, g, b, a };
}

/** rembg's parameters (query for GET; form fields, with `bgc` and `extras` in the query, for POST) as cutout's request. */
export function rembgRequest(get: (name: string) => { value: string | undefined; where: 'query' | 'body' }): RemoveRequest {
  const model = get('model');
  if (model.value !== undefined && model.value !== '' && !(REMBG_MODELS as readonly string[]).includes(model.value)) {
    throw new RembgValidationError(model.where, 'model', `Input should be one of ${REMBG_MODELS.join(', ')}`, 'string_pattern_mismatch');
  }
  // Alpha matting (a, af, ab, ae) is checked and left to cutout's own edge refinement, always on.
  bool(get('a').where, 'a', get('a').value);
  int(get('af').where, 'af', get('af').value, 0, 255);
  int(get('ab').where, 'ab', get('ab').value, 0, 255);
  int(get('ae').where, 'ae', get('ae').value, 0, Number.MAX_SAFE_INTEGER);
  const onlyMask = bool(get('om').where, 'om', get('om').value) ?? false;
  const postProcess = bool(get('ppm').where, 'ppm', get('ppm').value) ?? false;
  const bgColor = onlyMask ? null : backgroundColor(get('bgc').value);
  return { size: 'full', format: 'png', bgColor, crop: false, mask: onlyMask, alpha: postProcess ? 'hard' : 'soft' };
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
