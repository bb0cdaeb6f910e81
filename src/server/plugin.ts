/**
 * APIs as plugins. An API (v1 today; remove.bg's dialect next) is mounted at its own prefix with
 * its own authentication and its own error body; the server's parts (context.ts), the rate limit
 * and the transport (http.ts) are shared. The app (app.ts) mounts each plugin and sends the
 * errors of a request under a plugin's prefix, not-found included, through that plugin's renderer.
 *
 * A plugin registers routes relative to its prefix, each either open (no caller) or for a caller:
 * then the plugin's `authenticate` and the per-caller rate limit run before the handler, which
 * gets the Caller. docs/internals.md ("APIs as plugins") says how to add one.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Polka, Request } from 'polka';
import type { CutoutError } from '../errors.js';
import { guard, type Caller, type RateLimiter } from './guards.js';

export type ApiMethod = 'get' | 'head' | 'post';
export type OpenHandler = (req: Request, res: ServerResponse) => void | Promise<void>;
export type CallerHandler = (req: Request, res: ServerResponse, caller: Caller) => void | Promise<void>;

/** What a plugin's `routes` registers on; paths are relative to the plugin's prefix. */
export interface ApiRoutes {
  /** A route anyone may call (health, results by capability URL, the documents). */
  open(method: ApiMethod, path: string, handler: OpenHandler): void;
  /** A route for a caller: the plugin's authenticate, then the rate limit, then the handler. */
  forCaller(method: ApiMethod, path: string, handler: CallerHandler): void;
}

export interface ApiPlugin {
  /** For messages and logs: `v1`, `remove.bg`. */
  readonly name: string;
  /** Where it is mounted, without a trailing slash: `/api/v1`, `/v1.0`. */
  readonly prefix: string;
  /** Who calls (an API key, a marketplace user); throws invalid_api_key, rendered by renderError. */
  authenticate(req: IncomingMessage): Promise<Caller>;
  /** Writes an error in this API's body; status and headers come from the CutoutError. */
  renderError(res: ServerResponse, err: CutoutError): void;
  /** The error for a path under the prefix that no route matches. */
  notFound(req: Request): CutoutError;
  /** Registers the API's routes. */
  routes(routes: ApiRoutes): void;
}

/** Mounts `plugin` on `app`: its routes under its prefix, the callers' routes behind its authentication. */
export function mountApi(app: Polka, plugin: ApiPlugin, limiter: RateLimiter): void {
  const deps = { authenticate: (req: IncomingMessage) => plugin.authenticate(req), limiter };
  plugin.routes({
    open(method, path, handler) {
      app[method](`${plugin.prefix}${path}`, (req, res) => handler(req, res));
    },
    forCaller(method, path, handler) {
      app[method](`${plugin.prefix}${path}`, async (req, res) => handler(req, res, await guard(req, res, deps)));
    },
  });
}

/** The plugin a request path belongs to (the longest prefix that matches), if any. */
export function pluginFor(plugins: readonly ApiPlugin[], path: string): ApiPlugin | undefined {
  let found: ApiPlugin | undefined;
  for (const p of plugins) {
    if ((path === p.prefix || path.startsWith(`${p.prefix}/`)) && (!found || p.prefix.length > found.prefix.length)) found = p;
  }
  return found;
}
