/**
 * Clipdrop's Remove background API (docs/clipdrop.md) as a plugin: `POST /remove-background/v1`,
 * the key in `x-api-key`, multipart `image_file` and `transparency_handling`, the output format
 * chosen by `Accept`, `x-remaining-credits` and `x-credits-consumed` on success, and errors as
 * `{"error": ...}` whose kind is the HTTP status. Only a translation: the same keys, ledger, rate
 * limit, limits, pool and door policy (sync-removal.ts) as every other API.
 */
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CutoutError, type ErrorCode } from '../../errors.js';
import { OptionError, parseEnum } from '../../options.js';
import type { Format } from '../../options.js';
import type { ImageProbe } from '../../pipeline/types.js';
import { resultFieldsOf, resultHeaders } from '../../result-fields.js';
import type { ServerContext } from '../context.js';
import type { Caller } from '../guards.js';
import { dialectCors, dialectDeadlineMs, fieldOf, keyCaller, readUpload, statusOf } from './dialect-kit.js';
import { acceptedRanges, sendBytes, sendJson } from '../http.js';
import type { ApiPlugin } from '../plugin.js';
import { runSyncRemoval } from '../sync-removal.js';

export const CLIPDROP_PREFIX = '/remove-background';
/** Clipdrop's input limit: 25 megapixels (its docs), below cutout's own 50. */
export const CLIPDROP_MAX_PIXELS = 25_000_000;
export const TRANSPARENCY_HANDLING = ['return_input_if_non_opaque', 'discard_alpha_layer'] as const;

type ClipdropContext = Pick<ServerContext, 'config' | 'pool' | 'removals' | 'store' | 'pipeline'>;

/** Clipdrop's status for each of cutout's error codes: the status is the error's kind there. */
const CLIPDROP_STATUS: Readonly<Record<ErrorCode, number>> = Object.freeze({
  invalid_api_key: 403,
  insufficient_credits: 402,
  rate_limited: 429,
  invalid_request: 400,
  unsupported_format: 400,
  image_too_large: 400,
  no_subject_detected: 400,
  processing_failed: 500,
  gpu_unavailable: 503,
  not_found: 404,
});

/** The status of a CutoutError: a missing key is 401 and an Accept it cannot serve 406 (their reasons); cutout's own 5xx (504) stays. */
export function clipdropStatus(err: CutoutError): number {
  if (err.reason === 'missing_key') return 401;
  if (err.reason === 'not_acceptable') return 406;
  return statusOf(err, CLIPDROP_STATUS[err.code] ?? 500);
}

function renderError(res: ServerResponse, err: CutoutError): void {
  sendJson(res, clipdropStatus(err), { error: err.message }, err.headers);
}

const ACCEPTED: Readonly<Record<string, Format>> = Object.freeze({
  'image/png': 'png', 'image/webp': 'webp', 'image/jpeg': 'jpg', 'image/jpg': 'jpg',
});

/**
 * The output format `Accept` asks for: its best-ranked type this API serves (PNG for none, for
 * `*\/*` and for `image/*`); a 406 when every range it lists is one cutout cannot serve.
 */
export function clipdropFormat(accept: string | undefined): Format {
  if (!accept || !accept.trim()) return 'png';
  for (const r of acceptedRanges(accept).filter((range) => range.q > 0)) {
    if (ACCEPTED[r.type]) return ACCEPTED[r.type];
    if (r.type === '*/*' || r.type === 'image/*') return 'png';
  }
  throw new CutoutError('invalid_request', `Cannot answer in ${JSON.stringify(accept)}: accept image/png, image/webp or image/jpeg.`, { reason: 'not_acceptable' });
}

interface ClipdropRequest {
  image: Buffer;
  handling: (typeof TRANSPARENCY_HANDLING)[number];
}

async function readClipdropRequest(req: IncomingMessage): Promise<ClipdropRequest> {
  const { image, fields } = await readUpload(req, 'image_file', () => new OptionError('image_file', 'image_file is required: send a multipart/form-data body with the image in image_file.'));
  const value = fieldOf(fields, 'transparency_handling');
  const handling = value ? parseEnum('transparency_handling', TRANSPARENCY_HANDLING, value, 'api') : 'return_input_if_non_opaque';
  return { image, handling };
}

/** The checks Clipdrop makes of the image itself: a decodable image of at most 25 megapixels. */
async function checkImage(ctx: ClipdropContext, image: Buffer): Promise<ImageProbe> {
  const probe = await ctx.pipeline.probeImage(image);
  if (probe.width * probe.height > CLIPDROP_MAX_PIXELS) {
    const mp = ((probe.width * probe.height) / 1e6).toFixed(1);
    throw new CutoutError('image_too_large', `The image is ${probe.width}x${probe.height} (${mp} megapixels); the limit is 25 megapixels.`, { param: 'image_file', reason: 'resolution_too_high' });
  }
  return probe;
}

/** The formats that can carry an alpha channel (JPEG cannot; BMP's is not trusted, decode.ts). */
const WITH_ALPHA = new Set(['png', 'webp', 'gif', 'tiff']);

async function handleRemove(ctx: ClipdropContext, req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<void> {
  let format: Format;
  try {
    format = clipdropFormat(req.headers.accept);
  } catch (err) {
    req.resume(); // the body is not read: drained, so that the connection can carry the answer
    throw err;
  }
  const asked = await readClipdropRequest(req);
  const probe = await checkImage(ctx, asked.image);
  const transparency = WITH_ALPHA.has(probe.format) ? await import('../../pipeline/transparency.js') : null;
  if (transparency && asked.handling === 'return_input_if_non_opaque' && (await transparency.hasTransparency(asked.image))) {
    // Clipdrop's default: an input that already has transparency comes back as it is. No model
    // ran, so nothing is charged (cutout's choice; docs/clipdrop.md).
    const balance = await ctx.store.ledger.balance(caller.accountId);
    sendBytes(res, 200, asked.image, `image/${probe.format}`, { 'x-remaining-credits': String(balance), 'x-credits-consumed': '0' });
    return;
  }
  const input = transparency && asked.handling === 'discard_alpha_layer' ? await transparency.withoutAlpha(asked.image) : asked.image;
  // Clipdrop's clients cannot name a quality: the server's configured one applies (CUTOUT_QUALITY).
  // The result has the input's dimensions: size full (a test key's is a preview, the door policy's).
  const { result, charged } = await runSyncRemoval(ctx, res, {
    id: crypto.randomUUID(),
    caller,
    // The hosted APIs answer stills: an animation's first frame, as before issue 55 (docs/http-api.md, "Animations").
    request: { size: 'full', format, bgColor: null, crop: false, quality: ctx.config.quality, animation: 'first' },
    deadlineMs: dialectDeadlineMs(ctx.config),
    input,
    description: 'clipdrop upload',
  });
  const balance = await ctx.store.ledger.balance(caller.accountId);
  sendBytes(res, 200, result.data, result.contentType, {
    'x-remaining-credits': String(balance),
    'x-credits-consumed': String(charged.creditsCharged),
    ...resultHeaders(resultFieldsOf(result), 'clipdrop'),
  });
}

export function clipdropApi(ctx: ClipdropContext): ApiPlugin {
  return {
    name: 'Clipdrop',
    prefix: CLIPDROP_PREFIX,
    cors: dialectCors('clipdrop', ['x-remaining-credits', 'x-credits-consumed']),
    authenticate: (req) => keyCaller(ctx.store, req, { missing: 'No api key provided', invalid: 'Invalid api key' }),
    renderError,
    notFound: (req) => new CutoutError('not_found', `No route ${req.method} ${req.path}. This server answers Clipdrop's POST /remove-background/v1.`),
    routes(api) {
      api.forCaller('post', '/v1', (req, res, caller) => handleRemove(ctx, req, res, caller));
    },
  };
}
