/**
 * The async API: POST /api/v1/jobs, POST /api/v1/jobs/batch and GET /api/v1/jobs/{job_id}.
 *
 * Submission checks everything that can be known at once (auth, rate limit, parameters, the
 * X-Callback-Url and any image_url against the SSRF rules, credits for `size=full`, room in the
 * queue), writes the input bytes durably under the data directory, inserts the job rows in one
 * transaction and only then answers 202. The work itself is done by the JobRunner
 * (src/queue/runner.ts) in the pool shared with the sync route.
 */
import { RESULT_FIELDS, resultJson, type ResultFieldTable } from '../../result-fields.js';
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CutoutError } from '../../errors.js';
import { formatMB, LIMITS, MB } from '../../limits.js';
import { assertFunded, paysWithCredits, payerOfCaller, upfrontPrice } from '../../billing.js';
import { API_DEFAULTS, assertPrecisionServed, colorToHex, forTestKey, parseImageOptions, UNSUPPORTED_PARAMS } from '../../options.js';
import type { JobRow, NewJob } from '../../store/db.js';
import type { Queryable } from '../../store/db.js';
import { assertPublicUrl } from '../../net/fetch-url.js';
import type { ServerContext } from '../context.js';
import { fingerprint, type Caller } from '../guards.js';
import { errorBody, mediaType, readJsonObject, sendJson } from '../http.js';
import { isUuidV4, sendInvalidJobId } from './routes-results.js';
import { OPTION_PARAMS, parseImageParams, readImageRequest, SOURCE_PARAMS, type ImageRequest } from './v1-params.js';

/** The parts of the server the job routes use. */
type JobsContext = Pick<ServerContext, 'jobs' | 'config' | 'store' | 'upstream' | 'idempotency' | 'baseUrl' | 'tracing'>;

/** A batch body: up to 50 base64 images would be 1.6 GB; large images belong in image_url. */
export const BATCH_MAX_BYTES = 64 * MB;
const MAX_CALLBACK_URL = 2048;

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function refuseWhenStopping(ctx: JobsContext): void {
  if (ctx.jobs.isStopping) throw new CutoutError('gpu_unavailable', 'The server is shutting down; retry shortly.', { headers: { 'Retry-After': String(LIMITS.busyRetryAfterSeconds) }, reason: 'shutting_down' });
}

/** X-Callback-Url, checked like image_url (public http(s) only unless --allow-private-network). */
async function readCallbackUrl(ctx: JobsContext, req: IncomingMessage): Promise<string | null> {
  const raw = header(req, 'x-callback-url');
  if (raw === undefined) return null;
  const value = raw.trim();
  if (value === '') throw new CutoutError('invalid_request', 'X-Callback-Url is empty.');
  if (value.length > MAX_CALLBACK_URL) throw new CutoutError('invalid_request', `X-Callback-Url is longer than ${MAX_CALLBACK_URL} characters.`);
  const checked = await assertPublicUrl(value, { allowPrivateNetwork: ctx.config.allowPrivateNetwork, label: 'X-Callback-Url' });
  return checked.url.href;
}

/**
 * Refuses with 402 when a paying caller's balance cannot cover the upfront price of the images
 * asked (billing.ts: `full` for sure; `auto` is priced when it runs, its pixels unknown here).
 */
async function requireCredits(ctx: JobsContext, caller: Caller, requests: ImageRequest[]): Promise<void> {
  const amount = requests.reduce((sum, r) => sum + upfrontPrice(r.options.size), 0);
  await assertFunded(payerOfCaller(caller), amount, (accountId) => ctx.store.ledger.balance(accountId), (balance) => (
    amount === 1
      ? 'Credit balance is 0; a full-size job costs 1 credit when it succeeds. Previews are free.'
      : `The batch asks for ${amount} full-size results but the balance is ${balance} credits; nothing was queued. Previews are free.`
  ));
}

function queueFull(ctx: JobsContext, queued: number): CutoutError {
  const retryAfter = ctx.jobs.retryAfterSeconds(queued);
  return new CutoutError(
    'gpu_unavailable',
    `The job queue is full (${queued} waiting, --queue-limit ${ctx.config.queueLimit}); nothing was queued. Retry in ${retryAfter} s.`,
    { headers: { 'Retry-After': String(retryAfter) }, reason: 'queue_full' },
  );
}

/**
 * Stores the inputs, then the jobs in one transaction (all or none) if the queue has room for
 * all of them. Returns the ids in order. On any refusal the written inputs are removed.
 * `seal(tx, ids)` runs inside that transaction (the Idempotency-Key's answer, built from the ids).
 */
async function enqueue(
  ctx: JobsContext,
  caller: Caller,
  items: ImageRequest[],
  callbackUrl: string | null,
  batchId: string | null,
  seal: (tx: Queryable, ids: string[]) => Promise<void>,
): Promise<string[]> {
  const { store, config } = ctx;
  // A cheap look first, so a full queue is answered before any file is written.
  const before = await store.jobs.counts();
  if (before.queued + items.length > config.queueLimit) throw queueFull(ctx, before.queued);
  // The request's span: each job's run, later and on any server, joins its trace.
  const traceparent = ctx.tracing.active()?.traceparent ?? null;
  const jobs: NewJob[] = items.map(({ options, source }) => ({
    id: crypto.randomUUID(),
    accountId: caller.accountId,
    keyId: caller.keyId,
    options,
    sourceKind: source.kind,
    sourceUrl: source.kind === 'image_url' ? source.url : null,
    input: source.kind === 'image_url' ? null : source.bytes,
    inputDesc: source.description,
    callbackUrl,
    billable: paysWithCredits(caller),
    batchId,
    traceparent,
  }));
  // The inputs are stored with the rows: all or none.
  const ids = jobs.map((job) => job.id);
  const { created, queued } = await store.jobs.create(jobs, config.queueLimit, (tx) => seal(tx, ids));
  if (!created) throw queueFull(ctx, queued);
  ctx.jobs.notify();
  return jobs.map((job) => job.id);
}

function idempotencyKeyOf(req: IncomingMessage): string | undefined {
  return header(req, 'idempotency-key');
}

/** POST /api/v1/jobs: one image, multipart or JSON, the parameters of /remove without its 4 MP cap. */
export async function handleCreateJob(ctx: JobsContext, req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<void> {
  const request = await readImageRequest(req);
  refuseWhenStopping(ctx);
  const callbackUrl = await readCallbackUrl(ctx, req);
  const options = forTestKey(request.options, caller.test);
  assertPrecisionServed(options.precision, ctx.upstream !== null);
  const { source } = request;
  if (source.kind === 'image_url') await assertPublicUrl(source.url, { allowPrivateNetwork: ctx.config.allowPrivateNetwork, label: 'image_url' });
  const print = fingerprint({
    options: { ...options, bgColor: colorToHex(options.bgColor) },
    source: source.kind === 'image_url' ? source.url : crypto.createHash('sha256').update(source.bytes).digest('hex'),
    callbackUrl,
  });
  const answer = (id: string) => ({ job_id: id, status: 'queued' as const });
  const { value, replayed } = await ctx.idempotency.run<ReturnType<typeof answer>>(caller, 'jobs', idempotencyKeyOf(req), print, async (seal) => {
    await requireCredits(ctx, caller, [{ options, source }]);
    const [jobId] = await enqueue(ctx, caller, [{ options, source }], callbackUrl, null, (tx, [id]) => seal(tx, answer(id)));
    return answer(jobId);
  });
  sendJson(res, 202, value, {
    Location: `${ctx.baseUrl}/api/v1/jobs/${value.job_id}`,
    ...(replayed ? { 'Idempotent-Replayed': 'true' } : {}),
  });
}

interface ItemProblem { index: number; param: string | null; msg: string; type: string }


/**
 * Validates a batch body. Body-level problems (not an object, no images array, 0 or more than 50
 * images, a bad top-level option or key) throw 400. Item problems are all collected: the caller
 * refuses the whole batch with 422 naming each item.
 */
async function parseBatch(ctx: JobsContext, body: Record<string, unknown>): Promise<{ items: ImageRequest[]; problems: ItemProblem[] }> {
  for (const name of Object.keys(body)) {
    if (name === 'images' || (OPTION_PARAMS as readonly string[]).includes(name)) continue;
    if ((SOURCE_PARAMS as readonly string[]).includes(name)) {
      throw new CutoutError('invalid_request', `${name} belongs inside an item of images: {"images": [{"${name}": ...}, ...]}.`);
    }
    if ((UNSUPPORTED_PARAMS as readonly string[]).includes(name)) throw new CutoutError('invalid_request', `Parameter ${name} is not supported by this service.`);
    throw new CutoutError('invalid_request', `Unknown batch field ${name}; expected images and the options ${OPTION_PARAMS.join(', ')}.`);
  }
  const images = body.images;
  const max = LIMITS.maxBatchImages;
  if (!Array.isArray(images)) throw new CutoutError('invalid_request', `images must be an array of 1 to ${max} items, each with image_url or image_file_b64.`);
  if (images.length === 0) throw new CutoutError('invalid_request', 'images is empty; a batch holds 1 to 50 images.');
  if (images.length > max) {
    throw new CutoutError('invalid_request', `A batch holds at most ${max} images; received ${images.length}. Split it into several batches. Nothing was queued.`);
  }
  const top: Record<string, unknown> = {};
  for (const name of OPTION_PARAMS) if (body[name] !== undefined && body[name] !== null) top[name] = body[name];
  parseImageOptions(top, 'api', API_DEFAULTS); // a bad top-level option is one 400 for the whole body

  const problems: ItemProblem[] = [];
  const items: (ImageRequest | null)[] = images.map((item, index) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      problems.push({ index, param: null, msg: 'Each item must be an object with image_url or image_file_b64.', type: 'invalid_request' });
      return null;
    }
    const own: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(item as Record<string, unknown>)) if (v !== null && v !== undefined) own[k] = v;
    if ('image_file' in own) {
      problems.push({ index, param: 'image_file', msg: 'A JSON batch cannot carry file uploads; send image_file_b64 or image_url.', type: 'invalid_request' });
      return null;
    }
    if (!('image_url' in own) && !('image_file_b64' in own)) {
      problems.push({ index, param: null, msg: 'Give exactly one image source: image_url or image_file_b64.', type: 'invalid_request' });
      return null;
    }
    try {
      return parseImageParams({ ...top, ...own });
    } catch (err) {
      const e = err instanceof CutoutError ? err : new CutoutError('invalid_request', String(err));
      problems.push({ index, param: e.param ?? null, msg: e.message, type: e.code });
      return null;
    }
  });
  // The SSRF check of every image_url, in parallel (DNS lookups).
  await Promise.all(items.map(async (item, index) => {
    if (!item || item.source.kind !== 'image_url') return;
    try {
      await assertPublicUrl(item.source.url, { allowPrivateNetwork: ctx.config.allowPrivateNetwork, label: 'image_url' });
    } catch (err) {
      problems.push({ index, param: 'image_url', msg: (err as Error).message, type: 'invalid_request' });
    }
  }));
  problems.sort((a, b) => a.index - b.index);
  return { items: items.filter((i): i is ImageRequest => i !== null), problems };
}

/** POST /api/v1/jobs/batch: JSON only, 1 to 50 images, one job per image, ids in image order. */
export async function handleCreateBatch(ctx: JobsContext, req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<void> {
  if (caller.channel === 'marketplace') {
    req.resume();
    throw new CutoutError(
      'invalid_request',
      'POST /api/v1/jobs/batch is not offered through the marketplace channel (batches are billed per image to a direct API key). Send one POST /api/v1/jobs per image.',
    );
  }
  const type = mediaType(req);
  if (type !== 'application/json') {
    req.resume();
    throw new CutoutError('invalid_request', `POST /api/v1/jobs/batch takes a JSON body only (application/json) but received ${JSON.stringify(type || 'none')}; send each image as image_url or image_file_b64.`);
  }
  let body: Record<string, unknown>;
  try {
    body = await readJsonObject(req, BATCH_MAX_BYTES);
  } catch (err) {
    if (err instanceof CutoutError && err.code === 'image_too_large') {
      throw new CutoutError('image_too_large', `The batch body is over the ${formatMB(BATCH_MAX_BYTES)} limit; send large images by image_url or in smaller batches.`);
    }
    throw err;
  }
  refuseWhenStopping(ctx);
  const callbackUrl = await readCallbackUrl(ctx, req);
  const { items, problems } = await parseBatch(ctx, body);
  if (problems.length > 0) {
    const first = problems[0];
    const more = problems.length > 1 ? ` (${problems.length} invalid items in all; see detail)` : '';
    const error = new CutoutError('invalid_request', `images[${first.index}]: ${first.msg.replace(/\.$/, '')}${more}. Nothing was queued.`, { status: 422 });
    sendJson(res, 422, {
      ...errorBody(res, error),
      detail: problems.map((p) => ({ loc: ['body', 'images', p.index, ...(p.param ? [p.param] : [])], msg: p.msg, type: p.type })),
    });
    return;
  }
  const requests = items.map((item) => ({ ...item, options: forTestKey(item.options, caller.test) }));
  for (const r of requests) assertPrecisionServed(r.options.precision, ctx.upstream !== null);
  const print = fingerprint({
    callbackUrl,
    items: requests.map(({ options, source }) => ({
      options: { ...options, bgColor: colorToHex(options.bgColor) },
      source: source.kind === 'image_url' ? source.url : crypto.createHash('sha256').update(source.bytes).digest('hex'),
    })),
  });
  const answer = (ids: string[]) => ({ job_ids: ids, jobs: ids.map((id) => ({ job_id: id, status: 'queued' as const })) });
  const { value, replayed } = await ctx.idempotency.run<ReturnType<typeof answer>>(caller, 'jobs/batch', idempotencyKeyOf(req), print, async (seal) => {
    await requireCredits(ctx, caller, requests);
    const ids = await enqueue(ctx, caller, requests, callbackUrl, crypto.randomUUID(), (tx, queued) => seal(tx, answer(queued)));
    return answer(ids);
  });
  sendJson(res, 202, value, replayed ? { 'Idempotent-Replayed': 'true' } : {});
}

/** The job record of api-spec 2.3 as the API shows it, with a done job's result fields (the table's JSON keys). */
export function jobRecord(ctx: Pick<ServerContext, 'baseUrl'>, job: JobRow, table: ResultFieldTable = RESULT_FIELDS): Record<string, unknown> {
  const out: Record<string, unknown> = { job_id: job.id, status: job.status };
  if (job.status === 'done') {
    out.url = `${ctx.baseUrl}/api/v1/results/${job.id}`;
    out.credits_charged = job.creditsCharged ?? 0;
    out.credits_remaining = job.creditsRemaining ?? 0;
    Object.assign(out, resultJson(job.resultFields, table));
  }
  if (job.status === 'failed') out.error = { code: job.error?.code ?? 'processing_failed', message: job.error?.message ?? 'Processing failed; nothing was charged.' };
  out.created_at = new Date(job.createdAt).toISOString();
  out.updated_at = new Date(job.updatedAt).toISOString();
  return out;
}

/** GET /api/v1/jobs/{job_id}: only the owning account sees a job; for anyone else it does not exist. */
export async function handleGetJob(ctx: JobsContext, res: ServerResponse, caller: Caller, jobId: string): Promise<void> {
  if (!isUuidV4(jobId)) return sendInvalidJobId(res, jobId);
  const job = await ctx.store.jobs.get(jobId.toLowerCase(), caller.accountId);
  if (!job) throw new CutoutError('not_found', `No job with id ${jobId} for this account, or it has expired.`);
  const pending = job.status === 'queued' || job.status === 'processing';
  sendJson(res, 200, jobRecord(ctx, job), { 'Cache-Control': 'no-store', ...(pending ? { 'Retry-After': String(LIMITS.jobPollSeconds) } : {}) });
}
