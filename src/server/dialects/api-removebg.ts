/**
 * remove.bg's API v1.0 as a plugin (docs/removebg.md): `POST /v1.0/removebg` and
 * `GET /v1.0/account`, the key in `X-Api-Key`, remove.bg's answers, headers and error shape
 * `{"errors": [{title, code, detail}]}`. Only a translation: the same keys, ledger, rate limit,
 * limits, pool and remove-and-record service as v1. Every size is answered synchronously through
 * the pool that runs jobs, under the dialect's own deadline (not v1's 4 MP sync rule).
 */
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { canAfford, payerOfCaller, priceOf } from '../../billing.js';
import { CutoutError, type ErrorCode } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import { fetchImageUrl } from '../../net/fetch-url.js';
import { OptionError } from '../../options.js';
import type { RemoveRequest } from '../../pipeline/types.js';
import type { ServerContext } from '../context.js';
import type { Caller } from '../guards.js';
import { sendBytes, sendJson } from '../http.js';
import type { ApiPlugin } from '../plugin.js';
import { readRemoveBgRequest, type RemoveBgSource } from './removebg-params.js';
import { dialectBody, resultFieldsOf, resultHeaders } from '../../result-fields.js';
import { dialectCors, dialectDeadlineMs, keyCaller, statusOf, wantsJsonNotImage } from './dialect-kit.js';
import { runSyncRemoval } from '../sync-removal.js';

export const REMOVEBG_PREFIX = '/v1.0';

/**
 * Every answer of the dialect carries `Access-Control-Allow-Origin: *`, as remove.bg's do
 * (recorded); the plugin's `cors` (plugin.ts) sets it, answers the preflight a browser sends
 * before an `X-Api-Key`, and lets a page read these headers of the answers: the result's
 * (`X-Width`, `X-Foreground-*`, ..., result-fields.ts) and the dialect's own.
 */
const CORS = dialectCors('removebg', ['X-Type', 'X-Credits-Charged']);

type RemoveBgContext = Pick<ServerContext, 'config' | 'pool' | 'removals' | 'store' | 'pipeline'>;

/** remove.bg's status and code for each of cutout's error codes. */
const REMOVEBG_ERRORS: Readonly<Record<ErrorCode, { status: number; code: string; title: string }>> = Object.freeze({
  invalid_api_key: { status: 403, code: 'auth_failed', title: 'API Key invalid' },
  insufficient_credits: { status: 402, code: 'insufficient_credits', title: 'Insufficient credits' },
  rate_limited: { status: 429, code: 'rate_limit_exceeded', title: 'Rate limit exceeded' },
  invalid_request: { status: 400, code: 'invalid_parameters', title: 'Invalid parameters' },
  unsupported_format: { status: 400, code: 'failed_to_read_image', title: 'There was an error reading the image.' },
  image_too_large: { status: 400, code: 'file_too_large', title: 'File exceeds limit' },
  no_subject_detected: { status: 400, code: 'unknown_foreground', title: 'Could not identify foreground in image' },
  processing_failed: { status: 500, code: 'processing_failed', title: 'Processing failed' },
  gpu_unavailable: { status: 503, code: 'service_unavailable', title: 'Service unavailable' },
  not_found: { status: 404, code: 'not_found', title: 'Not found' },
});

/** Parameters whose bad value has its own code in remove.bg (`invalid_<name>`). */
const PARAM_CODES: Readonly<Record<string, string>> = Object.freeze({
  size: 'invalid_size', format: 'invalid_format', channels: 'invalid_channels', bg_color: 'invalid_bg_color',
  crop_margin: 'invalid_crop_margin', roi: 'invalid_roi', scale: 'invalid_scale', position: 'invalid_position',
  semitransparency: 'invalid_semitransparency', image_url: 'invalid_image_url', bg_image_url: 'invalid_bg_image_url',
});

/** remove.bg's `{status, code, title}` for a CutoutError; `detail` is cutout's message. */
export function removeBgError(err: CutoutError): { status: number; code: string; title: string } {
  const base = REMOVEBG_ERRORS[err.code] ?? REMOVEBG_ERRORS.processing_failed;
  // By the error's reason (errors.ts ERROR_REASONS), never its message.
  if (err.reason === 'resolution_too_high') return { ...base, code: 'resolution_too_high', title: 'Input image resolution too high' };
  if (err.reason === 'not_an_image') return { ...base, code: 'invalid_file_type', title: 'Invalid file type' };
  if (err.reason === 'missing_key') return { ...base, title: 'Missing API Key' };
  if (err instanceof OptionError) {
    const code = err.reason ?? PARAM_CODES[err.param];
    if (code) return { ...base, code, title: code.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase()) };
  }
  return { ...base, status: statusOf(err, base.status) };
}

function renderError(res: ServerResponse, err: CutoutError): void {
  const { status, code, title } = removeBgError(err);
  sendJson(res, status, { errors: [{ title, code, detail: err.message }] }, err.headers);
}

/** The key in X-Api-Key (every client), or as a Bearer token (remove.bg's OAuth place). */
const KEY_RULE = { bearer: true, missing: 'Missing API Key: send it in the X-Api-Key header.', invalid: 'API Key invalid.' };

/** Downloads a URL source through the SSRF guard, its failures in remove.bg's words. */
async function fetchSource(ctx: RemoveBgContext, source: RemoveBgSource, param: 'image_url' | 'bg_image_url', signal: AbortSignal): Promise<Buffer> {
  if (source.kind === 'bytes') return source.bytes;
  try {
    return await fetchImageUrl(source.url, { allowPrivateNetwork: ctx.config.allowPrivateNetwork, timeoutMs: LIMITS.fetchTimeoutMs, signal });
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (err instanceof CutoutError && err.code === 'invalid_request') {
      const what = param === 'image_url' ? 'image' : 'background image';
      throw new OptionError(param, `Failed to download ${what} from given ${param}: ${err.message}`, param === 'image_url' ? 'failed_image_download' : 'failed_bg_download');
    }
    throw err;
  }
}

function numberText(n: number): string {
  return String(Number(n.toFixed(2)));
}

async function handleRemoveBg(ctx: RemoveBgContext, req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<void> {
  const asked = await readRemoveBgRequest(req);
  // A test key's results are previews, as on v1 (and free).
  // remove.bg's clients cannot name a quality: the server's configured one applies (CUTOUT_QUALITY).
  const quality = asked.request.quality ?? ctx.config.quality;
  // A test key's preview (with remove.bg's preview area) is the door policy's (sync-removal.ts).
  const request: RemoveRequest = { ...asked.request, quality };
  const payer = payerOfCaller(caller);
  if (asked.autoSize && !(await canAfford(payer, priceOf('full'), (id) => ctx.store.ledger.balance(id)))) {
    // remove.bg's `auto` is "the highest available resolution (based on image size and available
    // credits)": without a credit, a free preview rather than a 402.
    request.size = 'preview';
    request.maxArea = LIMITS.removebgPreviewPixels;
  }
  const { result, charged } = await runSyncRemoval(ctx, res, {
    id: crypto.randomUUID(),
    caller,
    request,
    testPreview: { maxArea: LIMITS.removebgPreviewPixels },
    deadlineMs: dialectDeadlineMs(ctx.config),
    input: async (signal) => {
      const [image, background] = await Promise.all([
        fetchSource(ctx, asked.source, 'image_url', signal),
        asked.background ? fetchSource(ctx, asked.background, 'bg_image_url', signal) : Promise.resolve(undefined),
      ]);
      // remove.bg's `auto`: the highest resolution, a preview when the image is no larger than one (free).
      const small = asked.autoSize && request.size !== 'preview' && (await ctx.pipeline.probeImage(image).then((p) => p.width * p.height <= LIMITS.removebgPreviewPixels));
      return { image, background, request: small ? { size: 'preview' } : undefined };
    },
    description: `remove.bg ${asked.source.description}`,
  });
  // The result's headers (X-Width, X-Max-Width, X-Foreground-*, X-Cutout-Confidence, ...) and its
  // JSON `data` keys are the table's (result-fields.ts); the charge and the type are the dialect's.
  const fields = resultFieldsOf(result);
  const headers: Record<string, string> = { ...resultHeaders(fields, 'removebg'), 'X-Credits-Charged': numberText(charged.creditsCharged) };
  if (asked.xType) headers['X-Type'] = asked.xType;
  if (wantsJsonNotImage(req)) {
    // Exactly remove.bg's `data` (removebg-api.md, S1a): the image and the subject's box.
    sendJson(res, 200, { data: { result_b64: result.data.toString('base64'), ...dialectBody(fields, 'removebg') } }, headers);
    return;
  }
  sendBytes(res, 200, result.data, result.contentType, headers);
}

/** remove.bg's account body from the ledger: the balance is the caller's credits (cutout has one kind). */
async function handleAccount(ctx: Pick<ServerContext, 'store'>, res: ServerResponse, caller: Caller): Promise<void> {
  const balance = await ctx.store.ledger.balance(caller.accountId);
  sendJson(res, 200, {
    data: { attributes: { credits: { subscription: 0, payg: balance, enterprise: 0, total: balance }, api: { free_calls: 0, sizes: 'all' } } },
  });
}

export function removeBgApi(ctx: RemoveBgContext): ApiPlugin {
  return {
    name: 'remove.bg',
    prefix: REMOVEBG_PREFIX,
    cors: CORS,
    authenticate: (req) => keyCaller(ctx.store, req, KEY_RULE),
    renderError,
    notFound: (req) => new CutoutError('not_found', `No route ${req.method} ${req.path}. This server answers remove.bg's POST /v1.0/removebg and GET /v1.0/account.`),
    routes(api) {
      api.forCaller('post', '/removebg', (req, res, caller) => handleRemoveBg(ctx, req, res, caller));
      api.forCaller('get', '/account', (_req, res, caller) => handleAccount(ctx, res, caller));
    },
  };
}
