/**
 * The admin API's part of the OpenAPI document (openapi.ts spreads it in): its paths under the
 * `admin` tag, its schemas and its security scheme. Plain data, like the rest of the document;
 * the routes it describes are routes-admin.ts's table.
 */
import { CutoutError } from '../../errors.js';

type Json = Record<string, unknown>;

const schema = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const response = (name: string): Json => ({ $ref: `#/components/responses/${name}` });
const SECURITY = [{ adminToken: [] }];
const json = (s: Json, description: string, example?: unknown): Json => ({ description, content: { 'application/json': { schema: s, ...(example === undefined ? {} : { example }) } } });

/** Every admin route's refusals: 401 (no token, a wrong one), 403 (a customer's key). */
const REFUSALS: Json = { '401': response('Error401'), '403': response('AdminError403') };
const idParam = (name: string, description: string): Json => ({ name: 'id', in: 'path', required: true, description, schema: { type: 'string', pattern: `^${name}_` } });
const KEY_ID = idParam('key', 'The key\'s id (`key_...`).');
const ACCOUNT_ID = idParam('acct', 'The account\'s id (`acct_...`).');
const PAGE_PARAMS: Json[] = [
  { name: 'limit', in: 'query', required: false, description: 'Items per page, 1 to 500.', schema: { type: 'integer', minimum: 1, maximum: 500, default: 50 } },
  { name: 'after', in: 'query', required: false, description: 'The `next` of the previous page.', schema: { type: 'string' } },
];

const KEY_FIELDS: Json = {
  expires_at: { type: ['string', 'null'], format: 'date-time', description: 'ISO 8601 with a zone; after it every door answers 401 `invalid_api_key` (reason `key_expired`), judged by the store\'s clock. Null: never.' },
  rate_limit: { type: ['integer', 'null'], minimum: 1, maximum: 1_000_000, description: 'Requests per minute of this key on every door, in place of the server\'s `--rate-limit`, counted across a fleet. Null: the server\'s.' },
  labels: { type: ['object', 'null'], additionalProperties: { type: 'string', maxLength: 256 }, maxProperties: 32, description: 'Your own labels (team, customer id, ...).' },
};

const op = (operationId: string, summary: string, extra: Json): Json => ({ operationId, tags: ['admin'], summary, security: SECURITY, ...extra });

export const ADMIN_TAG = { name: 'admin', description: 'The operator\'s API (`--admin-token`): keys, credits, accounts, the audit trail. Off (404) without an admin token.' };

export const ADMIN_PATHS: Json = {
  '/api/v1/admin/keys': {
    post: op('adminCreateKey', 'Create a key (its secret is shown this once)', {
      description: 'Without `account`, a new account with the free credits; `credits` are added on top (a top-up recorded with the key). Recorded in the audit trail.',
      requestBody: { required: true, content: { 'application/json': { schema: schema('AdminKeyCreate') } } },
      responses: { '201': json(schema('AdminCreatedKey'), 'The key, with its secret `key`.'), '400': response('Error400'), ...REFUSALS, '404': response('Error404') },
    }),
    get: op('adminListKeys', 'List keys (never their secrets)', {
      parameters: [{ name: 'account', in: 'query', required: false, description: 'Only this account\'s keys.', schema: { type: 'string' } }, ...PAGE_PARAMS],
      responses: { '200': json(schema('AdminKeyPage'), 'One page of keys, oldest first.'), '400': response('Error400'), ...REFUSALS },
    }),
  },
  '/api/v1/admin/keys/{id}': {
    get: op('adminGetKey', 'A key (never its secret)', { parameters: [KEY_ID], responses: { '200': json(schema('AdminKey'), 'The key.'), ...REFUSALS, '404': response('Error404') } }),
    patch: op('adminUpdateKey', 'Change a key\'s name, expiry, rate limit or labels', {
      description: 'A field left out stays; null clears it. Holds from the key\'s next request on every server (keys are never cached).',
      parameters: [KEY_ID],
      requestBody: { required: true, content: { 'application/json': { schema: schema('AdminKeyUpdate') } } },
      responses: { '200': json(schema('AdminKey'), 'The key as changed.'), '400': response('Error400'), ...REFUSALS, '404': response('Error404') },
    }),
    delete: op('adminRevokeKey', 'Revoke a key', {
      description: 'At once, on every server of a fleet: keys are read from the store on every request. Revoking a revoked key changes nothing.',
      parameters: [KEY_ID],
      responses: { '200': json(schema('AdminKey'), 'The key, with `revoked_at`.'), ...REFUSALS, '404': response('Error404') },
    }),
  },
  '/api/v1/admin/accounts/{id}/credits': {
    post: op('adminAddCredits', 'Top up (or correct) an account\'s credits', {
      description: 'A ledger row with the reason given. A negative amount is a correction, refused when it would take the balance below 0.',
      parameters: [ACCOUNT_ID],
      requestBody: { required: true, content: { 'application/json': { schema: schema('AdminCredits') } } },
      responses: { '200': json(schema('AdminCreditsDone'), 'The balance after.'), '400': response('Error400'), ...REFUSALS, '404': response('Error404') },
    }),
  },
  '/api/v1/admin/accounts/{id}': {
    get: op('adminGetAccount', 'An account\'s balance and usage', {
      parameters: [ACCOUNT_ID],
      responses: { '200': json(schema('AdminAccount'), 'Balance, plan, this month\'s use and the last 30 days.'), ...REFUSALS, '404': response('Error404') },
    }),
  },
  '/api/v1/admin/audit': {
    get: op('adminListAudit', 'The audit trail', {
      description: 'Append-only: every admin request (done, failed or refused) and every key or credit change made with the CLI, oldest first.',
      parameters: [
        { name: 'since', in: 'query', required: false, description: 'Events at or after this time (ISO 8601, or ms since the epoch).', schema: { type: 'string' } },
        { name: 'action', in: 'query', required: false, description: 'Only this action (`key.create`, `key.update`, `key.revoke`, `credits.add`, `key.list`, `key.get`, `account.get`, `audit.list`).', schema: { type: 'string' } },
        ...PAGE_PARAMS,
      ],
      responses: { '200': json(schema('AdminAuditPage'), 'One page of events.'), '400': response('Error400'), ...REFUSALS },
    }),
  },
};

const KEY_PROPS: Json = {
  id: { type: 'string' }, account: { type: 'string' }, name: { type: ['string', 'null'] },
  mode: { type: 'string', enum: ['live', 'test'] }, test: { type: 'boolean' }, hint: { type: 'string', description: 'The key\'s last 4 characters.' },
  created_at: { type: 'string', format: 'date-time' }, revoked_at: { type: ['string', 'null'], format: 'date-time' }, ...KEY_FIELDS,
};
const KEY_REQUIRED = ['id', 'account', 'name', 'mode', 'test', 'hint', 'created_at', 'revoked_at', 'expires_at', 'rate_limit', 'labels'];
const page = (item: string): Json => ({ type: 'object', required: ['data', 'next'], properties: { data: { type: 'array', items: schema(item) }, next: { type: ['string', 'null'], description: 'Pass as `after` for the next page; null: the last page.' } } });

export const ADMIN_SCHEMAS: Json = {
  AdminKey: { type: 'object', required: KEY_REQUIRED, properties: KEY_PROPS },
  AdminCreatedKey: {
    type: 'object', required: [...KEY_REQUIRED, 'key', 'credits'],
    properties: { ...KEY_PROPS, key: { type: 'string', description: 'The secret: shown only in this answer.' }, credits: { type: 'integer', description: 'The account\'s balance.' } },
  },
  AdminKeyCreate: {
    type: 'object', additionalProperties: false,
    properties: {
      name: { type: 'string', maxLength: 200 }, account: { type: 'string', description: 'Add the key to this account; absent: a new account.' },
      credits: { type: 'integer', minimum: 0, description: 'Credits to add to the account.' }, mode: { type: 'string', enum: ['live', 'test'], default: 'live' }, ...KEY_FIELDS,
    },
  },
  AdminKeyUpdate: { type: 'object', additionalProperties: false, properties: { name: { type: ['string', 'null'], maxLength: 200 }, ...KEY_FIELDS } },
  AdminKeyPage: page('AdminKey'),
  AdminCredits: {
    type: 'object', required: ['amount', 'reason'], additionalProperties: false,
    properties: { amount: { type: 'integer', not: { const: 0 }, description: 'Credits to add; negative: a correction.' }, reason: { type: 'string', minLength: 1, maxLength: 500 } },
  },
  AdminCreditsDone: { type: 'object', required: ['account', 'amount', 'reason', 'balance'], properties: { account: { type: 'string' }, amount: { type: 'integer' }, reason: { type: 'string' }, balance: { type: 'integer' } } },
  AdminAccount: {
    type: 'object', required: ['account_id', 'balance', 'plan', 'test', 'credits_used_this_month', 'requests_this_month', 'usage'],
    properties: {
      account_id: { type: 'string' }, balance: { type: 'integer' }, plan: { type: 'string', enum: ['free', 'paid', 'marketplace'] }, test: { type: 'boolean' },
      credits_used_this_month: { type: 'integer' }, requests_this_month: { type: 'integer' }, usage: { type: 'array', items: schema('UsageDay') },
    },
  },
  AdminAuditEvent: {
    type: 'object', required: ['id', 'at', 'actor', 'action', 'target', 'request_id', 'outcome', 'detail'],
    properties: {
      id: { type: 'integer' }, at: { type: 'string', format: 'date-time', description: 'By the store\'s clock.' },
      actor: { type: 'string', description: '`admin`, `cli:<os user>`, `key:<id>` (a customer\'s key refused), `anonymous`.' },
      action: { type: 'string' }, target: { type: ['string', 'null'] }, request_id: { type: ['string', 'null'] },
      outcome: { type: 'string', enum: ['ok', 'refused', 'failed'] }, detail: { type: ['object', 'null'], description: 'What changed or why it was refused; never a secret.' },
    },
  },
  AdminAuditPage: page('AdminAuditEvent'),
};

export const ADMIN_RESPONSES: Json = {
  AdminError403: {
    description: 'A customer\'s API key, not the admin token. Codes: `invalid_api_key`.',
    content: { 'application/json': { schema: schema('Error'), example: new CutoutError('invalid_api_key', 'An API key is not the admin token: the admin API is for the server\'s operator.', { status: 403 }).body('http://127.0.0.1:8080') } },
  },
};

export const ADMIN_SECURITY_SCHEME: Json = {
  type: 'http', scheme: 'bearer',
  description: '`Authorization: Bearer <admin token>`: the server\'s `--admin-token` (`CUTOUT_ADMIN_TOKEN`, `CUTOUT_ADMIN_TOKEN_FILE`). Not an API key: a key gets 403.',
};
