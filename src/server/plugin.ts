/**
 * APIs as plugins. An API (v1 today; remove.bg's dialect next) is mounted at its own prefix with
 * its own authentication and its own error body; the server's parts (context.ts), the rate limit
 * and the transport (http.ts) are shared. The app (app.ts) mounts each plugin and sends the
 * errors of a request under a plugin's prefix, not-found included, through that plugin's renderer.
 *
 * A plugin registers routes relative to its prefix, each either open (no caller) or for a caller:
 * then the plugin's `authenticate` and the per-caller rate limit run before the handler, which
 * gets the Caller. docs/internals.md ("APIs as plugins") says how to add one.
 *
 * A plugin whose original API is called from browsers on any origin (remove.bg's, rembg's) says
 * so with `cors`: every answer under its prefix then carries `Access-Control-Allow-Origin: *` and
 * the headers a page may read, and each of its paths answers a browser's preflight (`OPTIONS`)
 * with the methods registered there. No credentials (cookies) are ever allowed, which is what
 * makes `*` safe: a key travels in a header the page itself sets.
 *
 * A plugin may choose its own `limits` (docs/internals.md, "APIs as plugins"): a rate limit of
 * its own, counted in a window of its own per caller instead of the server's shared one, and a
 * lower body limit for every request under its prefix, refused in its own error body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Polka, Request } from 'polka';
import type { CutoutError } from '../errors.js';
import { guard, type Caller, type RateLimiter } from './guards.js';
import { limitBody } from './http.js';
import { setCallerKeyId } from './request-span.js';

export type ApiMethod = 'get' | 'head' | 'post' | 'patch' | 'delete';
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
  /** Answers to any origin (see the header), with these response headers readable by the page. */
  readonly cors?: { readonly exposeHeaders: readonly string[] };
  /** Limits of this API's own in place of the server's (see ApiLimits). */
  readonly limits?: ApiLimits;
}

/** What an API may choose for itself; each one left out is the server's. */
export interface ApiLimits {
  /**
   * Requests per minute per caller at this API, counted in a window of its own (a request here
   * does not count against the caller's shared window, nor one elsewhere against this one), with
   * the same sliding-window semantics and headers. Default: the server's `--rate-limit`, in the
   * window every API without a limit of its own shares.
   */
  readonly rateLimitPerMinute?: number;
  /**
   * The largest request body this API reads, in bytes; it can only lower the server's own limits
   * (25 MB per upload). A larger declared body is refused before it is read, one sent without its
   * length as soon as an upload or the fields pass it: image_too_large in the API's error body.
   */
  readonly bodyBytes?: number;
}

/** The rate limiter of `plugin`'s callers: the server's shared one, or a window of the plugin's own. */
export function limiterOf(plugin: ApiPlugin, shared: RateLimiter): RateLimiter {
  const own = plugin.limits?.rateLimitPerMinute;
  return own === undefined ? shared : shared.scoped(`api:${plugin.name}`, own);
}

/** How long a browser may keep a preflight's answer (Chromium caps it at 2 hours). */
const PREFLIGHT_MAX_AGE_S = 7200;
/** What a preflight allows when the browser names no headers (it always does when it needs any). */
const DEFAULT_ALLOWED_HEADERS = 'X-Api-Key, Authorization, Content-Type, Accept';

/**
 * Sets the cross-origin headers of `plugin` on `res` (nothing for a plugin without `cors`). The
 * app calls it for every request, before any route: an answer, an error and a not-found under the
 * plugin's prefix all carry them.
 */
export function applyCors(plugin: ApiPlugin | undefined, res: ServerResponse): void {
  if (!plugin?.cors || res.headersSent) return;
  res.setHeader('Access-Control-Allow-Origin', '*');
  if (plugin.cors.exposeHeaders.length) res.setHeader('Access-Control-Expose-Headers', plugin.cors.exposeHeaders.join(', '));
}

/**
 * A browser's preflight: 204 with the path's methods and the headers it asked for (a list of
 * header names, checked as such; anything else gets the default list).
 */
function answerPreflight(req: IncomingMessage, res: ServerResponse, methods: readonly string[]): void {
  const asked = req.headers['access-control-request-headers'];
  const headers = typeof asked === 'string' && /^[\w-]+(\s*,\s*[\w-]+)*$/.test(asked.trim()) ? asked.trim() : DEFAULT_ALLOWED_HEADERS;
  res.writeHead(204, {
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Allow-Methods': [...methods, 'OPTIONS'].join(', '),
    'Access-Control-Allow-Headers': headers,
    'Access-Control-Max-Age': String(PREFLIGHT_MAX_AGE_S),
    Vary: 'Access-Control-Request-Headers',
  });
  res.end();
}

/**
 * Mounts `plugin` on `app`: its routes under its prefix, the callers' routes behind its
 * authentication and `limiter` (limiterOf), every request held to the plugin's body limit.
 */
export function mountApi(app: Polka, plugin: ApiPlugin, limiter: RateLimiter): void {
  const deps = { authenticate: (req: IncomingMessage) => plugin.authenticate(req), limiter };
  const bodyBytes = plugin.limits?.bodyBytes;
  /** The methods of each path, for its preflight. */
  const methods = new Map<string, string[]>();
  const add = (method: ApiMethod, path: string, handler: OpenHandler) => {
    const full = `${plugin.prefix}${path}`;
    methods.set(full, [...(methods.get(full) ?? []), method.toUpperCase()]);
    app[method](full, bodyBytes === undefined ? handler : (req, res) => {
      limitBody(req, bodyBytes);
      return handler(req, res);
    });
  };
  plugin.routes({
    open: add,
    forCaller(method, path, handler) {
      add(method, path, async (req, res) => {
        const caller = await guard(req, res, deps);
        setCallerKeyId(req, caller.keyId); // the request's span names the key (its id, never the key)
        return handler(req, res, caller);
      });
    },
  });
  if (plugin.cors) for (const [full, allowed] of methods) app.options(full, (req, res) => answerPreflight(req, res, allowed));
}

/** The plugin a request path belongs to (the longest prefix that matches), if any. */
export function pluginFor(plugins: readonly ApiPlugin[], path: string): ApiPlugin | undefined {
  let found: ApiPlugin | undefined;
  for (const p of plugins) {
    if ((path === p.prefix || path.startsWith(`${p.prefix}/`)) && (!found || p.prefix.length > found.prefix.length)) found = p;
  }
  return found;
}
