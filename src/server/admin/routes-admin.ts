/**
 * The admin routes, one row each: method, path, the audit trail's action, whether it only reads,
 * its target (for the trail) and its handler. JSON in and out; the shapes are the OpenAPI
 * document's (admin-openapi.ts).
 */
import type { ServerResponse } from 'node:http';
import type { Request } from 'polka';
import { CutoutError } from '../../errors.js';
import { keyLimitsOf } from '../../key-fields.js';
import type { AuditActor, Store } from '../../store/db.js';
import { keyBody } from '../../store/ledger.js';
import type { ServerContext } from '../context.js';
import { readJsonObject, sendJson } from '../http.js';

/** What the admin routes use of the server: the store, the log, the token. */
export type AdminContext = Pick<ServerContext, 'store' | 'logger'> & { config: Pick<ServerContext['config'], 'adminToken'> };

export interface AdminRoute {
  method: 'get' | 'post' | 'patch' | 'delete';
  path: string;
  action: string;
  /** A read: recorded once answered (a change records itself, in its own transaction). */
  reads?: boolean;
  target?: (params: Record<string, string>) => string;
  handle(ctx: AdminContext, req: Request, res: ServerResponse, actor: AuditActor): Promise<void>;
}

const DEFAULT_PAGE = 50;
const MAX_PAGE = 500;
const MAX_NAME = 200;
const MAX_REASON = 500;

function queryOf(req: Request): URLSearchParams {
  return new URL(req.url ?? '/', 'http://x').searchParams;
}

function invalid(param: string, message: string): CutoutError {
  return new CutoutError('invalid_request', `${param}: ${message}`, { param });
}

/** `limit` and `after` of a paged list. */
function pageOf(q: URLSearchParams): { limit: number; after: number | null } {
  const limit = q.get('limit') ?? String(DEFAULT_PAGE);
  const after = q.get('after');
  if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > MAX_PAGE) throw invalid('limit', `a whole number from 1 to ${MAX_PAGE}`);
  if (after !== null && !/^\d{1,15}$/.test(after)) throw invalid('after', 'the `next` of the previous page');
  return { limit: Number(limit), after: after === null ? null : Number(after) };
}

/** An optional text field of a JSON body: a string of 1 to `max` characters, or null. */
function textOf(body: Record<string, unknown>, name: string, max: number): string | null | undefined {
  const v = body[name];
  if (v === undefined || v === null) return v;
  if (typeof v !== 'string' || v.trim() === '' || v.length > max) throw invalid(name, `a string of 1 to ${max} characters`);
  return v;
}

function onlyFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  const extra = Object.keys(body).find((k) => !allowed.includes(k));
  if (extra) throw invalid(extra, `not a field of this request (${allowed.join(', ')})`);
}

async function keyOr404(store: Store, id: string) {
  const key = await store.keys.get(id);
  if (!key) throw new CutoutError('not_found', `No API key with id ${JSON.stringify(id)}`);
  return key;
}

async function accountOr404(store: Store, id: string): Promise<void> {
  if (!id.startsWith('acct_')) throw new CutoutError('not_found', `No account with id ${JSON.stringify(id)}`);
  await store.ledger.resolveAccount(id).catch((err: unknown) => {
    throw err instanceof CutoutError && err.code === 'invalid_request' ? new CutoutError('not_found', err.message) : err;
  });
}

async function createKey(ctx: AdminContext, req: Request, res: ServerResponse, actor: AuditActor): Promise<void> {
  const body = await readJsonObject(req);
  onlyFields(body, ['name', 'account', 'credits', 'mode', 'expires_at', 'rate_limit', 'labels']);
  const mode = body.mode ?? 'live';
  if (mode !== 'live' && mode !== 'test') throw invalid('mode', 'live or test');
  const credits = body.credits ?? 0;
  if (!Number.isInteger(credits) || (credits as number) < 0) throw invalid('credits', 'a whole number of credits to add, 0 or more');
  const account = textOf(body, 'account', 100) ?? null;
  if (account !== null) await accountOr404(ctx.store, account);
  const created = await ctx.store.keys.create({ name: textOf(body, 'name', MAX_NAME) ?? null, test: mode === 'test', accountId: account, ...keyLimitsOf(body) }, actor);
  const balance = (credits as number) > 0
    ? (await ctx.store.ledger.addCredits(created.account, credits as number, { note: `with key ${created.id}`, audit: actor })).balance
    : created.credits;
  const info = await keyOr404(ctx.store, created.id);
  // The secret, this once; never again from any route.
  sendJson(res, 201, { ...keyBody(info), key: created.key, credits: balance });
}

async function listKeys(ctx: AdminContext, req: Request, res: ServerResponse): Promise<void> {
  const q = queryOf(req);
  const { keys, next } = await ctx.store.keys.page({ accountId: q.get('account'), ...pageOf(q) });
  sendJson(res, 200, { data: keys.map(keyBody), next: next === null ? null : String(next) });
}

async function updateKey(ctx: AdminContext, req: Request, res: ServerResponse, actor: AuditActor): Promise<void> {
  const body = await readJsonObject(req);
  onlyFields(body, ['name', 'expires_at', 'rate_limit', 'labels']);
  const name = textOf(body, 'name', MAX_NAME);
  const info = await ctx.store.keys.update(req.params.id, { ...(name !== undefined ? { name } : {}), ...keyLimitsOf(body) }, actor);
  sendJson(res, 200, keyBody(info));
}

async function revokeKey(ctx: AdminContext, req: Request, res: ServerResponse, actor: AuditActor): Promise<void> {
  await keyOr404(ctx.store, req.params.id);
  await ctx.store.keys.revoke(req.params.id, actor);
  sendJson(res, 200, keyBody(await keyOr404(ctx.store, req.params.id)));
}

async function addCredits(ctx: AdminContext, req: Request, res: ServerResponse, actor: AuditActor): Promise<void> {
  const body = await readJsonObject(req);
  onlyFields(body, ['amount', 'reason']);
  const reason = textOf(body, 'reason', MAX_REASON);
  if (!reason) throw invalid('reason', `required: why the credits change, 1 to ${MAX_REASON} characters`);
  if (typeof body.amount !== 'number') throw invalid('amount', 'a whole number of credits (negative: a correction)');
  await accountOr404(ctx.store, req.params.id);
  const { accountId, balance } = await ctx.store.ledger.addCredits(req.params.id, body.amount, { note: reason, audit: actor });
  sendJson(res, 200, { account: accountId, amount: body.amount, reason, balance });
}

async function getAccount(ctx: AdminContext, req: Request, res: ServerResponse): Promise<void> {
  await accountOr404(ctx.store, req.params.id);
  const info = await ctx.store.ledger.account(req.params.id);
  const days = await ctx.store.ledger.usage(req.params.id);
  sendJson(res, 200, {
    account_id: info.accountId, balance: info.balance, plan: info.plan, test: info.test,
    credits_used_this_month: info.creditsUsedThisMonth, requests_this_month: info.requestsThisMonth, usage: days,
  });
}

/** `since`: an ISO 8601 time or ms since the epoch. */
function sinceOf(q: URLSearchParams): number | null {
  const since = q.get('since');
  if (since === null) return null;
  const ms = /^\d+$/.test(since) ? Number(since) : Date.parse(since);
  if (!Number.isFinite(ms)) throw invalid('since', 'an ISO 8601 time or milliseconds since the epoch');
  return ms;
}

async function listAudit(ctx: AdminContext, req: Request, res: ServerResponse): Promise<void> {
  const q = queryOf(req);
  const { events, next } = await ctx.store.audit.list({ since: sinceOf(q), action: q.get('action'), ...pageOf(q) });
  const data = events.map((e) => ({ id: e.id, at: e.at, actor: e.actor, action: e.action, target: e.target, request_id: e.requestId, outcome: e.outcome, detail: e.detail }));
  sendJson(res, 200, { data, next: next === null ? null : String(next) });
}

/** The trail's target: the key or account id of the path. */
const idOfPath = (p: Record<string, string>) => p.id;

export const ADMIN_ROUTES: readonly AdminRoute[] = Object.freeze([
  { method: 'post', path: '/keys', action: 'key.create', handle: createKey },
  { method: 'get', path: '/keys', action: 'key.list', reads: true, handle: listKeys },
  { method: 'get', path: '/keys/:id', action: 'key.get', reads: true, target: idOfPath, handle: async (ctx, req, res) => sendJson(res, 200, keyBody(await keyOr404(ctx.store, req.params.id))) },
  { method: 'patch', path: '/keys/:id', action: 'key.update', target: idOfPath, handle: updateKey },
  { method: 'delete', path: '/keys/:id', action: 'key.revoke', target: idOfPath, handle: revokeKey },
  { method: 'post', path: '/accounts/:id/credits', action: 'credits.add', target: idOfPath, handle: addCredits },
  { method: 'get', path: '/accounts/:id', action: 'account.get', reads: true, target: idOfPath, handle: getAccount },
  { method: 'get', path: '/audit', action: 'audit.list', reads: true, handle: listAudit },
]);
