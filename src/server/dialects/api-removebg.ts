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
import { CutoutError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import { fetchImageUrl } from '../../net/fetch-url.js';
import { OptionError } from '../../options.js';
import type { RemoveRequest } from '../../pipeline/types.js';
import type { ServerContext } from '../context.js';
import type { Caller } from '../guards.js';
import { sendBytes, sendJson } from '../http.js';
import { renderError } from './removebg-errors.js';
import type { ApiPlugin } from '../plugin.js';
import { readRemoveBgRequest, type RemoveBgSource } from './removebg-params.js';
import { dialectBody, resultFieldsOf, resultHeaders } from '../../result-fields.js';
import { dialectCors, dialectDeadlineMs, keyCaller, wantsJsonNotImage } from './dialect-kit.js';
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
