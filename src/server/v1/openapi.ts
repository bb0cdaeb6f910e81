/**
 * The OpenAPI 3.1.0 description of the v1 HTTP API (api-spec.md), kept as plain data. Served at
 * `GET /api/v1/openapi.json` and printed by `cutout openapi`. Enums, defaults and limits come from
 * options.ts, limits.ts and errors.ts, so a change there cannot leave this document behind.
 */
import { CutoutError, ERROR_TABLE, errorDocsUrl, type ErrorCode } from '../../errors.js';
import { formatMB, LIMITS } from '../../limits.js';
import { CONTENT_TYPES, FORMATS, OPTION_TABLE } from '../../options.js';
import { RESULT_FIELDS, resultHeaderNames, type ResultFieldTable } from '../../result-fields.js';
import { REQUEST_ID_HEADER } from '../request-log.js';
import { ADMIN_PATHS, ADMIN_RESPONSES, ADMIN_SCHEMAS, ADMIN_SECURITY_SCHEME, ADMIN_TAG } from '../admin/admin-openapi.js';
import { REMOVALS_LIMIT } from './routes-account.js';

type Json = Record<string, unknown>;

const ref = (kind: string, name: string): Json => ({ $ref: `#/components/${kind}/${name}` });
const schema = (name: string): Json => ref('schemas', name);

const ERROR_CODES = Object.keys(ERROR_TABLE) as ErrorCode[];
/** The `{base_url}` of the examples: the servers entry's default. */
const EXAMPLE_BASE = 'http://127.0.0.1:8080';
const MP = (pixels: number): string => `${pixels / 1_000_000} MP`;
const hours = (seconds: number): string => `${seconds / 3600} h`;

/** Headers sent with every authenticated answer (api-spec 8.3). */
const RATE_LIMIT_HEADERS: Json = {
  'X-RateLimit-Limit': ref('headers', 'XRateLimitLimit'),
  'X-RateLimit-Remaining': ref('headers', 'XRateLimitRemaining'),
  'X-RateLimit-Reset': ref('headers', 'XRateLimitReset'),
};

/** Binary image content, one entry per output format. */
const imageContent = (): Json =>
  Object.fromEntries(FORMATS.map((f) => [CONTENT_TYPES[f], { schema: { type: 'string', format: 'binary' } }]));

/** Parameters that every authenticated operation declares (api-spec 5.5, 5.6). */
const AUTH_PARAMS = [ref('parameters', 'Authorization')];
const MARKETPLACE_PARAMS = [ref('parameters', 'XMarketplaceProxySecret'), ref('parameters', 'XMarketplaceUser')];

/** Error responses by status, each a reusable component. */
const errors = (...statuses: number[]): Json =>
  Object.fromEntries(statuses.map((s) => [String(s), ref('responses', `Error${s}`)]));

/** Error response component: the Error shape, with the codes that use this status listed. */
function errorResponse(status: number, codes: ErrorCode[], description: string, extra: Json = {}): Json {
  return {
    description: `${description} Codes: ${codes.map((c) => `\`${c}\``).join(', ')}.`,
    ...extra,
    content: {
      'application/json': {
        schema: schema('Error'),
        example: new CutoutError(codes[0]).body(EXAMPLE_BASE),
      },
    },
  };
}

/** The image options' parameters, each a reference to its component (both from the options table). */
const headerComponent = (header: string) => header.replace(/-/g, '');

/**
 * What a result says of itself (result-fields.ts), as the document has it: v1's field headers (their
 * components, and the headers of a sync answer), the JSON properties of a job's record and callback
 * body, and each field's schema. Read off the table, so that a new row reaches the document with no
 * change here (test/result-fields.test.ts hands it a made-up one).
 */
export function resultFieldsOpenapi(table: ResultFieldTable = RESULT_FIELDS): { headerComponents: Json; headers: Json; props: (when: string) => Json; schemas: Json } {
  const v1 = table.flatMap((r) => resultHeaderNames('v1', [r]).map((name) => ({ name, r })));
  return {
    headerComponents: Object.fromEntries(v1.map(({ name, r }) => [headerComponent(name), { description: r.openapi.schema.description, schema: schema(r.openapi.name) }])),
    headers: Object.fromEntries(v1.map(({ name }) => [name, ref('headers', headerComponent(name))])),
    props: (when) => Object.fromEntries(table.map((r) => [r.json, { ...schema(r.openapi.name), description: when }])),
    schemas: Object.fromEntries(table.map((r) => [r.openapi.name, r.openapi.schema])),
  };
}
const resultFields = resultFieldsOpenapi();
const imageOptionProps: Json = Object.fromEntries(OPTION_TABLE.flatMap((r) => (r.api && r.openapi ? [[r.api, schema(r.openapi.name)]] : [])));
/** The options' components: Size, Format, BgColor, ... as the table describes them. */
const imageOptionSchemas: Json = Object.fromEntries(OPTION_TABLE.flatMap((r) => {
  if (!r.api || !r.openapi) return [];
  const apiDefault = r.defaults.api;
  return [[r.openapi.name, apiDefault === undefined || apiDefault === null ? r.openapi.schema : { default: apiDefault, ...r.openapi.schema }]];
}));

const SOURCE_RULE = 'Exactly one of `image_file` (multipart only), `image_url`, `image_file_b64`; otherwise `invalid_request`.';

/** Request body of `/remove` (with an uploaded background picture) and `/jobs`: the parameters of api-spec 2.1. */
const imageRequestBody = (multipart: 'RemoveInputMultipart' | 'ImageInputMultipart'): Json => ({
  required: true,
  description: `Image and options (api-spec 2.1). ${SOURCE_RULE}`,
  content: {
    'multipart/form-data': {
      schema: schema(multipart),
      encoding: {
        image_file: { contentType: 'image/*, application/octet-stream' },
        ...(multipart === 'RemoveInputMultipart' ? { bg_image_file: { contentType: 'image/*, application/octet-stream' } } : {}),
      },
    },
    'application/json': { schema: schema('ImageInputJson') },
  },
});

const jobIdPath = ref('parameters', 'JobId');
const jobCallbacks = { jobCompleted: ref('callbacks', 'JobCompleted') };

/** Freezes the whole tree: the served document must not be changed in place (parsers dereference in place). */
/**
 * Every operation takes an optional `X-Request-Id` and every answer carries one (successes,
 * errors): added here once rather than by hand on each of them.
 */
function withRequestIds(doc: Json): Json {
  const idHeader = { [REQUEST_ID_HEADER]: ref('headers', 'XRequestId') };
  const addHeader = (response: Json) => {
    if (!('$ref' in response)) response.headers = { ...idHeader, ...(response.headers as Json | undefined) };
  };
  for (const item of Object.values(doc.paths as Record<string, Record<string, Json>>)) {
    for (const operation of Object.values(item)) {
      operation.parameters = [...((operation.parameters as Json[] | undefined) ?? []), ref('parameters', 'XRequestId')];
      for (const response of Object.values(operation.responses as Record<string, Json>)) addHeader(response);
    }
  }
  for (const response of Object.values((doc.components as Json).responses as Record<string, Json>)) addHeader(response);
  return doc;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * The document, deeply frozen. Copy it (`structuredClone`) before handing it to a tool that
 * changes its input, or spread it to add e.g. a concrete `servers` entry.
 */
export const openapiDocument: Record<string, any> = deepFreeze(withRequestIds({
  openapi: '3.1.0',
  info: {
    title: 'cutout API',
    version: '1.0.0',
    summary: 'Remove the background from an image: sync, async jobs with callbacks, batches.',
    description: [
      'Previews (`size=preview`, longest side at most ' + LIMITS.previewMaxSide + ' px) are free',
      'and are what a request without `size` gets (the command line, `cutout remove`, defaults to `full` instead);',
      'a full-resolution result costs 1 credit, charged only on success.',
      `Results can be downloaded without authentication for ${hours(LIMITS.resultTtlSeconds)}.`,
      `Limits: ${formatMB(LIMITS.maxInputBytes)} and ${MP(LIMITS.maxInputPixels)} per image,`,
      `${MP(LIMITS.maxSyncFullPixels)} on sync \`/remove\` at \`size=full\`,`,
      `${LIMITS.maxBatchImages} images per batch, ${LIMITS.rateLimitPerMinute} requests per minute per key.`,
      'Within v1 changes only add fields.',
    ].join(' '),
    license: { name: 'AGPL-3.0-or-later', identifier: 'AGPL-3.0-or-later' },
  },
  servers: [
    {
      url: '{base_url}',
      description: 'The address the service runs at (`cutout serve --base-url`).',
      variables: { base_url: { default: 'http://127.0.0.1:8080' } },
    },
  ],
  security: [{ bearerAuth: [] }],
  tags: [
    { name: 'removal', description: 'Background removal, sync and async.' },
    { name: 'results', description: 'Stored results, downloadable without authentication.' },
    { name: 'account', description: 'Credits and usage.' },
    { name: 'meta', description: 'Health, metrics, the error reference and this document.' },
    ADMIN_TAG,
  ],
  paths: {
    '/api/v1/remove': {
      post: {
        operationId: 'removeBackground',
        tags: ['removal'],
        summary: 'Remove the background synchronously',
        description: [
          `At most ${MP(LIMITS.maxSyncFullPixels)} at \`size=full\` (larger images go through \`/jobs\`);`,
          `hard timeout ${LIMITS.syncTimeoutMs / 1000} s (\`processing_failed\`, 504, nothing charged).`,
          `A repeated \`Idempotency-Key\` within ${hours(LIMITS.idempotencyTtlSeconds)} returns the cached result without a second charge.`,
          'Balance 0 with `size=full` yields `insufficient_credits`; previews still work.',
          'When inference runs on an upstream server (`serve --upstream`) that is unreachable, timing out or answering 502/503/504: 503 `gpu_unavailable` with `Retry-After`, nothing charged.',
        ].join(' '),
        parameters: [...AUTH_PARAMS, ref('parameters', 'Accept'), ref('parameters', 'IdempotencyKey'), ...MARKETPLACE_PARAMS],
        requestBody: imageRequestBody('RemoveInputMultipart'),
        responses: {
          '200': {
            description:
              'The cutout in the requested `format`, or with `Accept: application/json` its metadata (the image is then at `url`).',
            headers: {
              'X-Credits-Charged': ref('headers', 'XCreditsCharged'),
              'X-Credits-Remaining': ref('headers', 'XCreditsRemaining'),
              'X-Job-Id': ref('headers', 'XJobId'),
              'X-Cutout-Size': ref('headers', 'XCutoutSize'),
              ...resultFields.headers,
              ...RATE_LIMIT_HEADERS,
            },
            content: { ...imageContent(), 'application/json': { schema: schema('SyncResult') } },
          },
          ...errors(400, 401, 402, 422, 429, 500, 503, 504),
        },
      },
    },
    '/api/v1/results/{job_id}': {
      get: {
        operationId: 'getResult',
        tags: ['results'],
        summary: 'Download a stored result',
        description: `No authentication: the UUID is the capability. Purged ${hours(LIMITS.resultTtlSeconds)} after creation. ` +
          'With `--results-redirect` and an object store, 302 to a presigned URL of the image (valid until the result expires, at most 7 days). ' +
          'When the object store cannot be reached, 503 `gpu_unavailable` with `Retry-After`.',
        security: [],
        parameters: [jobIdPath],
        responses: {
          '200': { description: 'The result image, with what it says of itself in the same headers as the sync answer\'s (results stored before they were kept have none).', headers: resultFields.headers, content: imageContent() },
          '302': { description: 'Under `--results-redirect`: the image is at `Location`, a presigned URL of the object store.', headers: { Location: { description: 'The presigned URL.', schema: { type: 'string', format: 'uri' } } } },
          ...errors(404, 422, 503),
        },
      },
    },
    '/api/v1/jobs': {
      post: {
        operationId: 'createJob',
        tags: ['removal'],
        summary: 'Queue one image',
        description:
          'Same inputs as `/remove`, without its 4 MP limit at `size=full`. Poll `GET /api/v1/jobs/{job_id}` or pass `X-Callback-Url`. ' +
          'The input is stored before the 202, so an accepted job survives a restart. ' +
          '`size=full` at balance 0 is refused at once with 402 (the credit is charged only when the job succeeds; ' +
          'if the balance has reached 0 by then, the job fails with `insufficient_credits`). ' +
          'A saturated queue (`--queue-limit` jobs waiting) answers 503 `gpu_unavailable` with `Retry-After`, at once.',
        parameters: [...AUTH_PARAMS, ref('parameters', 'XCallbackUrl'), ref('parameters', 'IdempotencyKey'), ...MARKETPLACE_PARAMS],
        requestBody: imageRequestBody('ImageInputMultipart'),
        responses: {
          '202': {
            description: 'Queued.',
            headers: { ...RATE_LIMIT_HEADERS, Location: { description: 'The job: `{base_url}/api/v1/jobs/<job_id>`.', schema: { type: 'string', format: 'uri' } } },
            content: { 'application/json': { schema: schema('JobCreated') } },
          },
          ...errors(400, 401, 402, 422, 429, 500, 503),
        },
        callbacks: jobCallbacks,
      },
    },
    '/api/v1/jobs/batch': {
      post: {
        operationId: 'createBatch',
        tags: ['removal'],
        summary: `Queue up to ${LIMITS.maxBatchImages} images`,
        description:
          'One job per image. Top-level options apply to every image; keys inside an item override them. ' +
          'Every item is validated before anything is created: if any item is invalid the whole batch is refused with 422 ' +
          '`invalid_request`, the message names the first item index and `detail` lists every invalid item ' +
          '(`loc: ["body", "images", <index>, <parameter>]`); nothing is queued. Body-level problems (not JSON, ' +
          `no \`images\` array, 0 or more than ${LIMITS.maxBatchImages} images, a bad top-level option) are 400. ` +
          'The balance must cover the items at `size=full` (402 otherwise), and the queue must have room for every image (503 otherwise). ' +
          'Direct API keys only: a marketplace call is refused with 400 `invalid_request`.',
        parameters: [...AUTH_PARAMS, ref('parameters', 'XCallbackUrl'), ref('parameters', 'IdempotencyKey')],
        requestBody: { required: true, content: { 'application/json': { schema: schema('BatchRequest') } } },
        responses: {
          '202': {
            description: 'Queued, one job per image, in request order.',
            headers: RATE_LIMIT_HEADERS,
            content: { 'application/json': { schema: schema('BatchCreated') } },
          },
          ...errors(400, 401, 402, 422, 429, 500, 503),
        },
        callbacks: jobCallbacks,
      },
    },
    '/api/v1/jobs/{job_id}': {
      get: {
        operationId: 'getJob',
        tags: ['removal'],
        summary: 'Job status',
        description: 'Only the account that created the job sees it: for any other key it is 404 `not_found`, like an unknown id.',
        parameters: [jobIdPath, ...AUTH_PARAMS, ...MARKETPLACE_PARAMS],
        responses: {
          '200': {
            description: 'The job record.',
            headers: RATE_LIMIT_HEADERS,
            content: { 'application/json': { schema: schema('Job') } },
          },
          ...errors(401, 404, 422, 429),
        },
      },
    },
    '/api/v1/account': {
      get: {
        operationId: 'getAccount',
        tags: ['account'],
        summary: 'Credit balance and plan',
        parameters: [...AUTH_PARAMS, ...MARKETPLACE_PARAMS],
        responses: {
          '200': {
            description: 'The account of the key.',
            headers: RATE_LIMIT_HEADERS,
            content: { 'application/json': { schema: schema('Account') } },
          },
          ...errors(401, 429),
        },
      },
    },
    '/api/v1/usage': {
      get: {
        operationId: 'getUsage',
        tags: ['account'],
        summary: `Credits used per day, last ${LIMITS.usageDays} days`,
        parameters: [...AUTH_PARAMS, ...MARKETPLACE_PARAMS],
        responses: {
          '200': {
            description: `${LIMITS.usageDays} days, newest first; days without use count 0.`,
            headers: RATE_LIMIT_HEADERS,
            content: { 'application/json': { schema: schema('Usage') } },
          },
          ...errors(401, 429),
        },
      },
    },
    '/api/v1/removals': {
      get: {
        operationId: 'listRemovals',
        tags: ['account'],
        summary: 'Recent removals of the account, with their confidence',
        description: 'Every door and key of the account, newest first. `confidence` is the result\'s while it is kept (`--result-ttl`), then null. No result id: each is a capability URL.',
        parameters: [
          ...AUTH_PARAMS, ...MARKETPLACE_PARAMS,
          { name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: REMOVALS_LIMIT.max, default: REMOVALS_LIMIT.default } },
        ],
        responses: {
          '200': {
            description: 'The removals, newest first.',
            headers: RATE_LIMIT_HEADERS,
            content: {
              'application/json': {
                schema: schema('Removals'),
                example: { removals: [{ created_at: '2026-11-28T17:05:00.000Z', channel: 'api', input: 'upload', size: 'full', credits: 1, ms: 812, confidence: 0.94 }] },
              },
            },
          },
          ...errors(400, 401, 429),
        },
      },
    },
    '/api/v1/health': {
      get: {
        operationId: 'getHealth',
        tags: ['meta'],
        summary: 'Liveness and readiness',
        description: 'No authentication. Always 200 while the process is up.',
        security: [],
        responses: {
          '200': {
            description: 'Up.',
            content: {
              'application/json': {
                schema: schema('Health'),
                example: {
                  status: 'ok', inference: 'local', version: '0.1.0', model: 'isnet-medium', workers: 2,
                  queue: { queued: 1, processing: 2, jobs: { queued: 1, processing: 1 }, sync: { waiting: 0, running: 1 } },
                  store: 'postgres',
                  server: { host: 'api-2', pid: 4121, startedAt: '2026-01-05T09:30:00.000Z', id: 'api-2:4121:1767605400000:3fa1c2' },
                },
              },
            },
          },
        },
      },
    },
    '/readyz': {
      get: {
        operationId: 'getReady',
        tags: ['meta'],
        summary: 'Readiness (load balancers, Kubernetes)',
        description:
          'No authentication. 200 when this server can take work now: its store answered a trivial query within ' +
          `${LIMITS.readyStoreTimeoutMs / 1000} s and, with \`serve --upstream\`, the upstream is ready; else 503 naming what is not ready ` +
          '(also while the server shuts down). Health stays 200 regardless.',
        security: [],
        responses: {
          '200': {
            description: 'Ready.',
            content: { 'application/json': { schema: { type: 'object' }, example: { status: 'ready', checks: { store: 'ready' } } } },
          },
          '503': {
            description: 'Not ready.',
            content: {
              'application/json': {
                schema: { type: 'object' },
                example: { status: 'not_ready', checks: { store: 'not_ready' }, not_ready: { store: 'the store did not answer within 2000 ms' } },
              },
            },
          },
        },
      },
    },
    '/metrics': {
      get: {
        operationId: 'getMetrics',
        tags: ['meta'],
        summary: 'Prometheus metrics',
        description:
          'No authentication, like health: expose it only where the scraper can reach it. Prometheus text format 0.0.4: ' +
          'request durations by route pattern and status, jobs by state and the queue depth (fleet-wide, from the store), ' +
          'inference time, callback deliveries by outcome, the store\'s readiness and failed heartbeats, and the process metrics. ' +
          '404 under `cutout serve --no-metrics`, and on the API port under `--metrics-port` (then served on that port alone).',
        security: [],
        responses: {
          '200': {
            description: 'The metrics.',
            content: {
              'text/plain; version=0.0.4; charset=utf-8': {
                schema: { type: 'string' },
                example: '# HELP cutout_jobs Jobs in the store by state\n# TYPE cutout_jobs gauge\ncutout_jobs{state="queued"} 3\n',
              },
            },
          },
          ...errors(404),
        },
      },
    },
    '/api/v1/errors': {
      get: {
        operationId: 'getErrorReference',
        tags: ['meta'],
        summary: 'The error reference',
        description:
          'An addition to v1, without authentication: every error code with its HTTP status(es), what it means and how to fix it. ' +
          'Each error\'s `docs` links here (`{base_url}/api/v1/errors#<code>`). JSON, or an HTML page when `Accept` ranks `text/html` first (a browser).',
        security: [],
        responses: {
          '200': {
            description: 'The reference, one entry per code.',
            content: {
              'application/json': {
                schema: schema('ErrorReference'),
                example: {
                  errors: [{
                    code: 'insufficient_credits', status: 402, statuses: [402],
                    meaning: 'The balance is 0 and the request asked for a full-resolution result (...), which costs 1 credit.',
                    fix: 'Ask `size=preview` (free, the default when `size` is not given), or add credits (...).',
                    docs: errorDocsUrl('insufficient_credits', EXAMPLE_BASE),
                  }],
                },
              },
              'text/html; charset=utf-8': { schema: { type: 'string' } },
            },
          },
        },
      },
    },
    '/api/v1/openapi.json': {
      get: {
        operationId: 'getOpenapi',
        tags: ['meta'],
        summary: 'This document',
        security: [],
        responses: {
          '200': {
            description: 'The OpenAPI 3.1.0 document.',
            content: { 'application/json': { schema: { type: 'object' } } },
          },
        },
      },
    },
    ...ADMIN_PATHS,
  },
  components: {
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        description:
          '`Authorization: Bearer <API_KEY>`; keys look like `cut_live_<secret>` or `cut_test_<secret>`. ' +
          'Missing, malformed, unknown, revoked or expired: 401 `invalid_api_key`.',
      },
      adminToken: ADMIN_SECURITY_SCHEME,
    },
    parameters: {
      Authorization: {
        name: 'Authorization',
        in: 'header',
        required: false,
        description: 'Declared optional, required in practice (api-spec 5.6): `Bearer <API_KEY>`. See `bearerAuth`.',
        schema: { type: 'string', pattern: '^Bearer .+$' },
      },
      Accept: {
        name: 'Accept',
        in: 'header',
        required: false,
        description: '`application/json` returns the metadata (SyncResult); anything else returns the image bytes.',
        schema: { type: 'string', default: 'image/png', examples: ['image/png', 'application/json'] },
      },
      XRequestId: {
        name: 'X-Request-Id',
        in: 'header',
        required: false,
        description:
          `Your id for this request, echoed in the \`X-Request-Id\` response header and logged: kept when it is 1 to ${LIMITS.maxRequestIdLength} ` +
          'characters of `A-Z a-z 0-9 . _ : -`, else replaced by a new UUID (never refused).',
        schema: { type: 'string' },
      },
      IdempotencyKey: {
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description: `Repeated within ${hours(LIMITS.idempotencyTtlSeconds)}: the cached result, no second charge.`,
        schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
      },
      XCallbackUrl: {
        name: 'X-Callback-Url',
        in: 'header',
        required: false,
        description: 'Public http(s) URL that receives `POST` with the job result when the job finishes (see callbacks).',
        schema: { type: 'string', format: 'uri' },
      },
      XMarketplaceProxySecret: {
        name: 'X-Marketplace-Proxy-Secret',
        in: 'header',
        required: false,
        description: 'Shared secret of a marketplace proxy; ignored unless the operator configured one.',
        schema: { type: 'string' },
      },
      XMarketplaceUser: {
        name: 'X-Marketplace-User',
        in: 'header',
        required: false,
        description: 'The marketplace user a proxied call is made for.',
        schema: { type: 'string' },
      },
      JobId: {
        name: 'job_id',
        in: 'path',
        required: true,
        description: 'Job id (UUID4), as returned by `/remove`, `/jobs` or `/jobs/batch`. Not a UUID: 422.',
        schema: { type: 'string', format: 'uuid' },
      },
    },
    headers: {
      XCreditsCharged: { description: 'Credits deducted by this call.', schema: { type: 'integer', enum: [0, 1] } },
      XCreditsRemaining: { description: 'Balance after this call.', schema: { type: 'integer', minimum: 0 } },
      XJobId: { description: 'Id of this removal (the `job_id` of its download URL).', schema: { type: 'string', format: 'uuid' } },
      XCutoutSize: {
        description: `An addition to v1: the size this result was made at, \`preview\` (longest side at most ${LIMITS.previewMaxSide} px, free) or \`full\` (native resolution), after \`size=auto\` was resolved. A request without \`size\` gets \`preview\`.`,
        schema: { type: 'string', enum: ['preview', 'full'] },
      },
      XRateLimitLimit: { description: 'Requests per minute for this key.', schema: { type: 'integer' } },
      XRateLimitRemaining: { description: 'Requests left in the sliding window.', schema: { type: 'integer', minimum: 0 } },
      XRateLimitReset: { description: 'Unix timestamp (seconds) when the window resets.', schema: { type: 'integer' } },
      RetryAfter: { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
      ...resultFields.headerComponents,
      XRequestId: {
        description: `This request's id: the caller's \`X-Request-Id\` when it is sane, else a new UUID. It is in the server's log line for the request.`,
        schema: { type: 'string', pattern: `^[A-Za-z0-9._:-]{1,${LIMITS.maxRequestIdLength}}$` },
      },
    },
    responses: {
      Error400: errorResponse(400, ['invalid_request', 'unsupported_format', 'image_too_large'], 'Bad request.'),
      Error401: errorResponse(401, ['invalid_api_key'], 'Missing, malformed, unknown, revoked or expired API key.'),
      Error402: errorResponse(402, ['insufficient_credits'], 'Balance is 0 and `size=full` was requested.'),
      Error404: errorResponse(404, ['not_found'], 'Unknown or expired `job_id`.'),
      Error422: {
        description:
          'Validation failed (`detail` shape), or the Error shape with `no_subject_detected` or `invalid_request`.',
        content: {
          'application/json': {
            // anyOf: a validation answer carries both `error` and `detail`, so it matches both.
            schema: { anyOf: [schema('Error'), schema('ValidationError')] },
            example: {
              error: { code: 'invalid_request', message: 'job_id must be a UUID v4.', docs: errorDocsUrl('invalid_request', EXAMPLE_BASE) },
              detail: [{ loc: ['path', 'job_id'], msg: 'Input should be a valid UUID v4, received "abc"', type: 'uuid_parsing' }],
            },
          },
        },
      },
      Error429: errorResponse(429, ['rate_limited'], 'Over the per-key rate limit.', {
        headers: { 'Retry-After': ref('headers', 'RetryAfter'), ...RATE_LIMIT_HEADERS },
      }),
      Error500: errorResponse(500, ['processing_failed'], 'Model error; nothing was charged.'),
      Error503: errorResponse(503, ['gpu_unavailable'], 'The queue is full (jobs), the upstream inference server is unavailable (`serve --upstream`), or the database did not answer in time (any call that needs it); retry after `Retry-After` seconds, nothing was charged.', {
        headers: { 'Retry-After': ref('headers', 'RetryAfter') },
      }),
      Error504: errorResponse(504, ['processing_failed'], `Sync timeout (${LIMITS.syncTimeoutMs / 1000} s); nothing was charged.`),
      ...ADMIN_RESPONSES,
    },
    schemas: {
      ...ADMIN_SCHEMAS,
      ...imageOptionSchemas,
      ...resultFields.schemas,
      ImageUrl: {
        type: 'string',
        format: 'uri',
        description: 'Public http(s) URL of the image; private and link-local addresses are blocked.',
      },
      ImageFileB64: { type: 'string', contentEncoding: 'base64', description: 'Base64 of the image bytes.' },
      ImageInputJson: {
        type: 'object',
        description: `${SOURCE_RULE} Accepted encodings: JPEG, PNG, WebP, GIF, BMP, TIFF.`,
        properties: { image_url: schema('ImageUrl'), image_file_b64: schema('ImageFileB64'), ...imageOptionProps },
        oneOf: [{ required: ['image_url'] }, { required: ['image_file_b64'] }],
      },
      ImageInputMultipart: {
        type: 'object',
        description: `${SOURCE_RULE} Accepted encodings: JPEG, PNG, WebP, GIF, BMP, TIFF.`,
        properties: {
          image_file: { type: 'string', format: 'binary', description: `The uploaded image, at most ${formatMB(LIMITS.maxInputBytes)}.` },
          image_url: schema('ImageUrl'),
          image_file_b64: schema('ImageFileB64'),
          ...imageOptionProps,
        },
        oneOf: [{ required: ['image_file'] }, { required: ['image_url'] }, { required: ['image_file_b64'] }],
      },
      RemoveInputMultipart: {
        description: 'The multipart body of `/remove`: that of a job, and a background picture may be uploaded.',
        allOf: [
          schema('ImageInputMultipart'),
          {
            type: 'object',
            properties: {
              bg_image_file: { type: 'string', format: 'binary', description: `A background picture, at most ${formatMB(LIMITS.maxInputBytes)}, centred and resized to cover the result; not with \`bg_image_url\`. \`/jobs\` takes the picture by URL only.` },
            },
          },
        ],
      },
      BatchItem: {
        type: 'object',
        description: 'One image; its options override the top-level ones.',
        properties: { image_url: schema('ImageUrl'), image_file_b64: schema('ImageFileB64'), ...imageOptionProps },
        oneOf: [{ required: ['image_url'] }, { required: ['image_file_b64'] }],
      },
      BatchRequest: {
        type: 'object',
        required: ['images'],
        properties: {
          images: { type: 'array', minItems: 1, maxItems: LIMITS.maxBatchImages, items: schema('BatchItem') },
          ...imageOptionProps,
        },
      },
      SyncResult: {
        type: 'object',
        required: ['id', 'url', 'width', 'height', 'credits_charged', 'credits_remaining', 'processing_ms'],
        properties: {
          id: { type: 'string', format: 'uuid', description: 'The `job_id` of the download URL.' },
          url: { type: 'string', format: 'uri', description: '`{base_url}/api/v1/results/<id>`.' },
          width: { type: 'integer', minimum: 1 },
          height: { type: 'integer', minimum: 1 },
          credits_charged: { type: 'integer', enum: [0, 1] },
          credits_remaining: { type: 'integer', minimum: 0 },
          processing_ms: { type: 'integer', minimum: 0 },
        },
      },
      JobStatus: { type: 'string', enum: ['queued', 'processing', 'done', 'failed'] },
      JobError: {
        type: 'object',
        required: ['code', 'message'],
        properties: { code: schema('ErrorCode'), message: { type: 'string' } },
      },
      JobCreated: {
        type: 'object',
        required: ['job_id', 'status'],
        properties: { job_id: { type: 'string', format: 'uuid' }, status: { type: 'string', const: 'queued' } },
      },
      BatchCreated: {
        type: 'object',
        required: ['job_ids', 'jobs'],
        properties: {
          job_ids: { type: 'array', items: { type: 'string', format: 'uuid' }, description: 'One per image, in request order.' },
          jobs: { type: 'array', items: schema('JobCreated') },
        },
      },
      Job: {
        type: 'object',
        required: ['job_id', 'status', 'created_at', 'updated_at'],
        properties: {
          job_id: { type: 'string', format: 'uuid' },
          status: schema('JobStatus'),
          url: { type: 'string', format: 'uri', description: 'When `done`.' },
          credits_charged: { type: 'integer', enum: [0, 1], description: 'When `done`.' },
          credits_remaining: { type: 'integer', minimum: 0, description: 'When `done`.' },
          ...resultFields.props('When `done`.'),
          error: { ...schema('JobError'), description: 'When `failed`; nothing was charged.' },
          created_at: { type: 'string', format: 'date-time' },
          updated_at: { type: 'string', format: 'date-time' },
        },
      },
      CallbackPayload: {
        type: 'object',
        required: ['job_id', 'status'],
        properties: {
          job_id: { type: 'string', format: 'uuid' },
          status: { type: 'string', enum: ['done', 'failed'] },
          url: { type: 'string', format: 'uri', description: 'When `done`.' },
          credits_charged: { type: 'integer', enum: [0, 1], description: 'When `done`.' },
          credits_remaining: { type: 'integer', minimum: 0, description: 'When `done`.' },
          ...resultFields.props('When `done`.'),
          error: { ...schema('JobError'), description: 'When `failed`.' },
        },
      },
      Account: {
        type: 'object',
        required: ['account_id', 'balance', 'plan', 'credits_used_this_month', 'test'],
        properties: {
          account_id: { type: 'string' },
          balance: { type: 'integer', minimum: 0, description: 'Credits left; purchased credits never expire.' },
          plan: { type: 'string', enum: ['free', 'paid', 'marketplace'] },
          credits_used_this_month: { type: 'integer', minimum: 0, description: 'In the current calendar month.' },
          test: { type: 'boolean', description: 'True for a `test_` key.' },
        },
      },
      UsageDay: {
        type: 'object',
        required: ['date', 'credits', 'requests'],
        properties: {
          date: { type: 'string', format: 'date', description: 'YYYY-MM-DD (UTC).' },
          credits: { type: 'integer', minimum: 0 },
          requests: { type: 'integer', minimum: 0 },
        },
      },
      Usage: {
        type: 'object',
        required: ['days'],
        properties: {
          days: {
            type: 'array',
            minItems: LIMITS.usageDays,
            maxItems: LIMITS.usageDays,
            items: schema('UsageDay'),
            description: 'Newest first.',
          },
        },
      },
      Removal: {
        type: 'object',
        required: ['created_at', 'channel', 'input', 'size', 'credits', 'ms', 'confidence'],
        properties: {
          created_at: { type: 'string', format: 'date-time' },
          channel: { type: 'string', enum: ['api', 'job', 'cli'], description: 'api: a sync request of any door; job: a job; cli: `cutout remove --key`.' },
          input: { type: ['string', 'null'], description: 'What the input was: `upload`, `url HOST`, a file name for the CLI.' },
          size: { type: 'string', enum: ['preview', 'full'] },
          credits: { type: 'integer', minimum: 0 },
          ms: { type: 'integer', minimum: 0, description: 'Processing time.' },
          confidence: { type: ['number', 'null'], minimum: 0, maximum: 1, description: 'How sure cutout is of the matte (1 sure); null once the result has expired.' },
        },
      },
      Removals: {
        type: 'object',
        required: ['removals'],
        properties: { removals: { type: 'array', items: schema('Removal'), description: 'Newest first.' } },
      },
      Health: {
        type: 'object',
        required: ['status', 'inference'],
        properties: {
          status: { type: 'string', const: 'ok' },
          inference: {
            type: 'string',
            enum: ['local', 'upstream'],
            description: '`upstream`: forwarded to a remote worker. `local`: a cold model still serves (it loads on first use).',
          },
          version: { type: 'string' },
          model: { type: 'string' },
          workers: { type: 'integer', minimum: 0 },
          store: { type: 'string', enum: ['sqlite', 'postgres'], description: 'Where the state lives: one SQLite file, or a PostgreSQL shared by a fleet.' },
          server: {
            type: 'object',
            description: 'Which server of a fleet answered: the identity its job leases and idempotency claims carry.',
            required: ['host', 'pid', 'startedAt', 'id'],
            properties: {
              host: { type: 'string' },
              pid: { type: 'integer', minimum: 1 },
              startedAt: { type: 'string', format: 'date-time' },
              id: { type: 'string', description: '`host:pid:startMillis:random`, unique across the fleet and restarts.' },
              },
            },
          upstream: {
            type: 'object',
            description: 'Only with `inference: "upstream"`: the Open Inference Protocol server that runs the model.',
            properties: {
              url: { type: 'string', description: 'Its base URL, without credentials.' },
              model: { type: 'string', description: "The model's name there." },
              binary: { type: 'boolean', description: 'Tensors travel with the binary tensor data extension (else as JSON).' },
              ready: { type: 'boolean', description: 'Whether /v2/health/ready answered 200 (probed at most every 2 s).' },
              sides: { type: 'array', items: { type: 'integer' }, description: 'Model input sides served there (quality settings on other sides are refused).' },
            },
          },
          queue: {
            type: 'object',
            description: 'Jobs (from the store) and sync requests, waiting and running.',
            properties: {
              queued: { type: 'integer', minimum: 0, description: 'Queued jobs plus sync requests waiting for a worker.' },
              processing: { type: 'integer', minimum: 0, description: 'Jobs processing plus sync requests running.' },
              jobs: {
                type: 'object',
                properties: { queued: { type: 'integer', minimum: 0 }, processing: { type: 'integer', minimum: 0 } },
              },
              sync: {
                type: 'object',
                properties: { waiting: { type: 'integer', minimum: 0 }, running: { type: 'integer', minimum: 0 } },
              },
            },
          },
        },
      },
      ErrorCode: { type: 'string', enum: ERROR_CODES },
      Error: {
        type: 'object',
        required: ['error'],
        description: 'The body of every non-2xx answer (except 422 validation, which may use ValidationError).',
        properties: {
          error: {
            type: 'object',
            required: ['code', 'message', 'docs'],
            properties: {
              code: schema('ErrorCode'),
              message: { type: 'string', description: 'Human-readable.' },
              docs: { type: 'string', format: 'uri', description: 'Reference for this code, served by the server itself: `{base_url}/api/v1/errors#<code>` (see `getErrorReference`).' },
            },
          },
        },
      },
      ErrorReference: {
        type: 'object',
        required: ['errors'],
        properties: {
          errors: {
            type: 'array',
            items: {
              type: 'object',
              required: ['code', 'status', 'statuses', 'meaning', 'fix', 'docs'],
              properties: {
                code: schema('ErrorCode'),
                status: { type: 'integer', description: 'The usual HTTP status of the code.' },
                statuses: { type: 'array', items: { type: 'integer' }, description: 'Every status the code comes with (`invalid_request`: 400 or 422).' },
                meaning: { type: 'string' },
                fix: { type: 'string' },
                docs: { type: 'string', format: 'uri', description: 'The link to this entry, as in an error\'s `docs`.' },
              },
            },
          },
        },
      },
      ValidationError: {
        type: 'object',
        required: ['detail'],
        properties: {
          detail: {
            type: 'array',
            items: {
              type: 'object',
              required: ['loc', 'msg', 'type'],
              properties: {
                loc: { type: 'array', items: { type: ['string', 'integer'] } },
                msg: { type: 'string' },
                type: { type: 'string' },
              },
            },
          },
        },
      },
    },
    callbacks: {
      JobCompleted: {
        '{$request.header.X-Callback-Url}': {
          post: {
            summary: 'Job finished',
            description:
              `Sent when a job created with \`X-Callback-Url\` finishes (\`done\` or \`failed\`); retried ${LIMITS.callbackRetries} times with ` +
              'exponential backoff (`--callback-backoff`, doubling) on network errors or 5xx; other statuses end delivery. ' +
              'At least once: dedupe by `job_id`. Treat it as a hint: confirm with `GET /api/v1/jobs/{job_id}`.',
            security: [],
            parameters: [
              {
                name: 'X-Service-Signature',
                in: 'header',
                required: true,
                description: '`sha256=<hex>`: HMAC-SHA256 of the raw body.',
                schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' },
              },
            ],
            requestBody: { required: true, content: { 'application/json': { schema: schema('CallbackPayload') } } },
            responses: { '2XX': { description: 'Received; any 2xx ends delivery.' } },
          },
        },
      },
    },
  },
}));
