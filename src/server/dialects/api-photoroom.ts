/**
 * Photoroom's Remove Background API ("basic plan", docs/photoroom.md) as two plugins: `/v1`
 * (`POST /v1/segment`, `GET /v1/account`) and `/v2` (`GET /v2/account`), the key in `x-api-key`,
 * Photoroom's parameters, its answers (the image, or `{"base64img"}` on `Accept:
 * application/json`), its `x-uncertainty-score` header (cutout's own measure: 1 - confidence) and
 * its error body `{detail, status_code, type}`. Only a translation: the same keys, ledger, rate
 * limit, limits, pool and door policy (sync-removal.ts) as every other API.
 */
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CutoutError, type ErrorCode } from '../../errors.js';
import { OptionError, parseBoolean, parseColor, parseEnum } from '../../options.js';
import type { RemoveRequest } from '../../pipeline/types.js';
import { resultFieldsOf, resultHeaders } from '../../result-fields.js';
import type { ServerContext } from '../context.js';
import type { Caller } from '../guards.js';
import { dialectCors, dialectDeadlineMs, fieldOf, keyCaller, readUpload, statusOf, wantsJsonNotImage } from './dialect-kit.js';
import { sendBytes, sendJson } from '../http.js';
import type { ApiPlugin } from '../plugin.js';
import { runSyncRemoval } from '../sync-removal.js';
import { handleEdit } from './photoroom-edit.js';
import { PHOTOROOM_SIZES } from './photoroom-sizes.js';

export const PHOTOROOM_PREFIX = '/v1';
export const PHOTOROOM_V2_PREFIX = '/v2';

const FORMATS = ['png', 'jpg', 'webp'] as const;

type PhotoroomContext = Pick<ServerContext, 'config' | 'pool' | 'removals' | 'store'>;

/** Photoroom's status and `type` for each of cutout's error codes (docs/photoroom.md "Errors"). */
const PHOTOROOM_ERRORS: Readonly<Record<ErrorCode, { status: number; type: string }>> = Object.freeze({
  invalid_api_key: { status: 403, type: 'invalid_api_key' },
  // Photoroom's own answer when the credits are gone (its docs): 402, type unknown_error.
  insufficient_credits: { status: 402, type: 'unknown_error' },
  rate_limited: { status: 429, type: 'rate_limit_exceeded' },
  invalid_request: { status: 400, type: 'invalid_parameter' },
  unsupported_format: { status: 400, type: 'invalid_image' },
  image_too_large: { status: 400, type: 'image_too_large' },
  no_subject_detected: { status: 400, type: 'no_subject_detected' },
  processing_failed: { status: 500, type: 'unknown_error' },
  gpu_unavailable: { status: 503, type: 'service_unavailable' },
  not_found: { status: 404, type: 'not_found' },
});

/** `{status, type}` of a CutoutError: its `reason` (missing_image) where it has one, else its code's row. */
export function photoroomError(err: CutoutError): { status: number; type: string } {
  const base = PHOTOROOM_ERRORS[err.code] ?? PHOTOROOM_ERRORS.processing_failed;
  if (err.code === 'invalid_request' && err.reason === 'missing_image') return { ...base, type: 'missing_image' };
  return { ...base, status: statusOf(err, base.status) };
}

function renderError(res: ServerResponse, err: CutoutError): void {
  const { status, type } = photoroomError(err);
  sendJson(res, status, { detail: err.message, status_code: status, type }, err.headers);
}

/** The key in `x-api-key` only: Photoroom takes no other place for it. */
const KEY_RULE = { missing: 'Missing API key: send it in the x-api-key header.', invalid: 'Invalid API key.' };

/**
 * The parameters, checked, as cutout's request. `despill` is checked and has no effect of its
 * own: cutout's edge colour estimation runs on every cutout (docs/photoroom.md says what it does
 * and does not do of a despill).
 */
export function parsePhotoroomParams(fields: Record<string, string[]>): RemoveRequest {
  const format = parseEnum('format', FORMATS, fieldOf(fields, 'format')?.toLowerCase() === 'jpeg' ? 'jpg' : fieldOf(fields, 'format') ?? 'png', 'api');
  const channels = parseEnum('channels', ['rgba', 'alpha'] as const, fieldOf(fields, 'channels') ?? 'rgba', 'api');
  const sizeName = parseEnum('size', Object.keys(PHOTOROOM_SIZES), fieldOf(fields, 'size')?.toLowerCase() ?? 'full', 'api');
  const crop = fieldOf(fields, 'crop') !== undefined ? parseBoolean('crop', fieldOf(fields, 'crop'), 'api') : false;
  if (fieldOf(fields, 'despill') !== undefined) parseBoolean('despill', fieldOf(fields, 'despill'), 'api');
  const bg = fieldOf(fields, 'bg_color');
  return {
    size: PHOTOROOM_SIZES[sizeName].size,
    maxArea: PHOTOROOM_SIZES[sizeName].maxArea,
    format,
    mask: channels === 'alpha',
    bgColor: bg === undefined || channels === 'alpha' ? null : parseColor(bg, 'api'),
    crop,
    // The hosted APIs answer stills: an animation's first frame, as before issue 55 (docs/http-api.md, "Animations").
    animation: 'first',
  };
}

async function handleSegment(ctx: PhotoroomContext, req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<void> {
  const { image, fields } = await readUpload(req, 'image_file', () => new OptionError('image_file', 'Please provide an image.', 'missing_image'));
  const asked = parsePhotoroomParams(fields);
  // Photoroom's clients cannot name a quality: the server's configured one applies (CUTOUT_QUALITY).
  const { result } = await runSyncRemoval(ctx, res, {
    id: crypto.randomUUID(),
    caller,
    request: { ...asked, quality: ctx.config.quality },
    testPreview: { maxArea: PHOTOROOM_SIZES.preview.maxArea },
    deadlineMs: dialectDeadlineMs(ctx.config),
    input: image,
    description: 'photoroom upload',
  });
  // x-uncertainty-score (1 - confidence) and X-Cutout-Confidence: the table's Photoroom headers (result-fields.ts).
  const headers = resultHeaders(resultFieldsOf(result), 'photoroom');
  if (wantsJsonNotImage(req)) {
    sendJson(res, 200, { base64img: result.data.toString('base64') }, headers);
    return;
  }
  sendBytes(res, 200, result.data, result.contentType, headers);
}

/** The ledger in `/v1/account`'s and `/v2/account`'s shapes (cutout has one kind of credit: all of it is `available`). */
async function handleAccount(ctx: Pick<ServerContext, 'store'>, res: ServerResponse, caller: Caller, version: 1 | 2): Promise<void> {
  const balance = await ctx.store.ledger.balance(caller.accountId);
  if (version === 1) sendJson(res, 200, { credits: { available: balance, subscription: 0 } });
  else sendJson(res, 200, { images: { available: balance, subscription: 0 }, plan: 'basic' });
}

/** Photoroom's web sample calls it from a page: every origin, these headers readable. */
const CORS = dialectCors('photoroom');

function notFound(req: { method?: string; path: string }): CutoutError {
  return new CutoutError('not_found', `No route ${req.method} ${req.path}. This server answers Photoroom's POST /v1/segment, GET /v1/account, GET /v2/account and POST or GET /v2/edit.`);
}

/** The two plugins of Photoroom's API: `/v1` (segment, account) and `/v2` (account, edit: photoroom-edit.ts). */
export function photoroomApis(ctx: PhotoroomContext): ApiPlugin[] {
  const common = { cors: CORS, authenticate: (req: IncomingMessage) => keyCaller(ctx.store, req, KEY_RULE), renderError, notFound };
  return [
    {
      ...common,
      name: 'Photoroom',
      prefix: PHOTOROOM_PREFIX,
      routes(api) {
        api.forCaller('post', '/segment', (req, res, caller) => handleSegment(ctx, req, res, caller));
        api.forCaller('get', '/account', (_req, res, caller) => handleAccount(ctx, res, caller, 1));
      },
    },
    {
      ...common,
      name: 'Photoroom v2',
      prefix: PHOTOROOM_V2_PREFIX,
      routes(api) {
        api.forCaller('get', '/account', (_req, res, caller) => handleAccount(ctx, res, caller, 2));
        api.forCaller('post', '/edit', (req, res, caller) => handleEdit(ctx, req, res, caller));
        api.forCaller('get', '/edit', (req, res, caller) => handleEdit(ctx, req, res, caller));
      },
    },
  ];
}
