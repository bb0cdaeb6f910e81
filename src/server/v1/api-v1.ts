/**
 * The v1 API (docs/http-api.md) as a plugin: mounted at /api/v1, callers identified by
 * `Authorization: Bearer <key>` (or the marketplace proxy), errors as the part 7 body
 * `{"error": {"code", "message", "docs"}}`.
 */
import { CutoutError } from '../../errors.js';
import type { ServerContext } from '../context.js';
import { identify } from '../guards.js';
import { sendError } from '../http.js';
import type { ApiPlugin } from '../plugin.js';
import { handleAccount, handleRemovals, handleUsage } from './routes-account.js';
import { handleErrors } from './routes-errors.js';
import { handleCreateBatch, handleCreateJob, handleGetJob } from './routes-jobs.js';
import { handleHealth, handleOpenapi } from '../routes-meta.js';
import { handleRemove } from './routes-remove.js';
import { handleResult } from './routes-results.js';

export const V1_PREFIX = '/api/v1';

/** The answer to a path no route matches, here and outside every API. */
export function v1NotFound(method: string | undefined, path: string): CutoutError {
  return new CutoutError('not_found', `No route ${method} ${path}. The API lives under /api/v1; see /api/v1/openapi.json.`);
}

export function v1Api(ctx: ServerContext): ApiPlugin {
  return {
    name: 'v1',
    prefix: V1_PREFIX,
    authenticate: (req) => identify(req, ctx.store, ctx.marketplaceSecret),
    renderError: (res, err) => sendError(res, err),
    notFound: (req) => v1NotFound(req.method, req.path),
    routes(api) {
      api.forCaller('post', '/remove', (req, res, caller) => handleRemove(ctx, req, res, caller));
      api.open('get', '/results/:job_id', (req, res) => handleResult(ctx, req.params.job_id, res));
      api.forCaller('post', '/jobs', (req, res, caller) => handleCreateJob(ctx, req, res, caller));
      api.forCaller('post', '/jobs/batch', (req, res, caller) => handleCreateBatch(ctx, req, res, caller));
      api.forCaller('get', '/jobs/:job_id', (req, res, caller) => handleGetJob(ctx, res, caller, req.params.job_id));
      api.forCaller('get', '/account', (_req, res, caller) => handleAccount(ctx, res, caller));
      api.forCaller('get', '/usage', (_req, res, caller) => handleUsage(ctx, res, caller));
      api.forCaller('get', '/removals', (req, res, caller) => handleRemovals(ctx, req, res, caller));
      api.open('get', '/health', (_req, res) => handleHealth(ctx, res));
      api.open('get', '/openapi.json', (_req, res) => handleOpenapi(res));
      api.open('get', '/errors', (req, res) => handleErrors(ctx, req, res)); // what every error's `docs` links to
    },
  };
}
