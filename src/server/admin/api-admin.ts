/**
 * The admin API (operator.md, "The admin API") as a plugin at /api/v1/admin: keys, credits,
 * accounts and the audit trail over HTTP, for `Authorization: Bearer <admin token>`. Mounted only
 * when the server has an admin token (`--admin-token`, `CUTOUT_ADMIN_TOKEN[_FILE]`); without one
 * the prefix belongs to v1, whose not-found answers every admin path 404.
 *
 * Every request is one event of the audit trail: refused (no token, a wrong one, a customer's
 * key), done, or failed. A change writes its event in its own transaction (the store's functions
 * take the actor); a read or a refusal appends it here. Errors are v1's body.
 */
import type { IncomingMessage } from 'node:http';
import { logAuditEvent } from '../../audit-trail.js';
import { CutoutError } from '../../errors.js';
import type { AuditActor, NewAuditEvent } from '../../store/db.js';
import { secretsEqual } from '../guards.js';
import { sendError } from '../http.js';
import type { ApiMethod, ApiPlugin, OpenHandler } from '../plugin.js';
import { ADMIN_ROUTES, type AdminContext, type AdminRoute } from './routes-admin.js';

export const ADMIN_PREFIX = '/api/v1/admin';

function requestIdOf(req: IncomingMessage): string | null {
  return (req as IncomingMessage & { id?: string }).id ?? null;
}

/** Appends an event outside any change (a read, a refusal, a failure) and logs its line. */
async function appendEvent(ctx: AdminContext, event: NewAuditEvent): Promise<void> {
  logAuditEvent(ctx.logger, await ctx.store.audit.append(event));
}

/**
 * The admin actor of `req`, or the refusal (recorded first): 401 without a token or with a wrong
 * one, 403 with a customer's key. The token is compared in constant time, as hashes.
 */
async function admit(ctx: AdminContext, req: IncomingMessage, action: string, target: string | null): Promise<AuditActor> {
  const requestId = requestIdOf(req);
  const given = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
  if (given !== undefined && secretsEqual(given, ctx.config.adminToken as string)) {
    return { actor: 'admin', requestId, onRecorded: (event) => logAuditEvent(ctx.logger, event) };
  }
  const challenge = { 'WWW-Authenticate': 'Bearer realm="cutout admin"' };
  // Whose key it was, if any: a customer trying the admin API is worth naming in the trail.
  const customer = given === undefined ? null : await ctx.store.keys.authenticate(given).catch(() => null);
  const refusal = given === undefined
    ? new CutoutError('invalid_api_key', 'The admin API needs Authorization: Bearer <admin token>.', { headers: challenge, reason: 'missing_key' })
    : customer
      ? new CutoutError('invalid_api_key', 'An API key is not the admin token: the admin API is for the server\'s operator.', { status: 403, reason: 'not_admin' })
      : new CutoutError('invalid_api_key', 'Wrong admin token.', { headers: challenge });
  await appendEvent(ctx, {
    actor: customer ? `key:${customer.keyId}` : 'anonymous', action, target, requestId, outcome: 'refused',
    detail: { status: refusal.status, ...(refusal.reason ? { reason: refusal.reason } : {}) },
  });
  throw refusal;
}

/** A route's handler behind the admin check, its outcome in the trail whatever it is. */
function adminHandler(ctx: AdminContext, route: AdminRoute): OpenHandler {
  return async (req, res) => {
    const target = route.target?.(req.params) ?? null;
    const actor = await admit(ctx, req, route.action, target);
    try {
      await route.handle(ctx, req, res, actor);
    } catch (err) {
      const e = err instanceof CutoutError ? err : null;
      await appendEvent(ctx, {
        actor: actor.actor, action: route.action, target, requestId: actor.requestId, outcome: 'failed',
        detail: { status: e?.status ?? 500, code: e?.code ?? 'processing_failed', ...(e ? { message: e.message } : {}) },
      });
      throw err;
    }
    // A change recorded its own event with the change; a read is recorded once answered.
    if (route.reads) await appendEvent(ctx, { actor: actor.actor, action: route.action, target, requestId: actor.requestId, outcome: 'ok' });
  };
}

export function adminApi(ctx: AdminContext): ApiPlugin {
  return {
    name: 'admin',
    prefix: ADMIN_PREFIX,
    authenticate: () => Promise.reject(new CutoutError('invalid_api_key')), // no route is for a caller (a key)
    renderError: (res, err) => sendError(res, err),
    notFound: (req) => new CutoutError('not_found', `No admin route ${req.method} ${req.path}; see the \`admin\` tag of /api/v1/openapi.json.`),
    routes(api) {
      for (const route of ADMIN_ROUTES) api.open(route.method as ApiMethod, route.path, adminHandler(ctx, route));
    },
  };
}
