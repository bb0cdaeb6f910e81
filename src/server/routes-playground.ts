/**
 * The web pages: the playground (`GET /`, its script, stylesheet and icon under /playground/) and
 * the account page (`GET /account`, its script and stylesheet under /account/). Everything is
 * served by cutout itself under a strict Content-Security-Policy (no inline script or style, no
 * other origin), and the pages talk only to the public /api/v1 routes, as any client would.
 * `--no-playground` (config.playground false) turns both off: 404 with the part 7 body (the
 * account page is a page of the same kind, for the same customers, and needs the same choice).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Polka } from 'polka';
import { CutoutError } from '../errors.js';
import { PLAYGROUND_HTML } from './playground/html.js';
import { PLAYGROUND_CSS } from './playground/style.js';
import { PLAYGROUND_JS } from './playground/script.js';
import { PLAYGROUND_ICON } from './playground/icon.js';
import { ACCOUNT_HTML } from './account-page/html.js';
import { ACCOUNT_CSS } from './account-page/style.js';
import { ACCOUNT_JS } from './account-page/script.js';
import type { ServerContext } from './context.js';

/** The policy of every playground response: only this origin, no inline code, no framing. */
export const PLAYGROUND_CSP = [
  "default-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset { body: Buffer; type: string }

const ASSETS: Record<string, Asset> = {
  '/': { body: Buffer.from(PLAYGROUND_HTML), type: 'text/html; charset=utf-8' },
  '/playground/app.js': { body: Buffer.from(PLAYGROUND_JS), type: 'text/javascript; charset=utf-8' },
  '/playground/app.css': { body: Buffer.from(PLAYGROUND_CSS), type: 'text/css; charset=utf-8' },
  '/playground/icon.svg': { body: Buffer.from(PLAYGROUND_ICON), type: 'image/svg+xml' },
  '/account': { body: Buffer.from(ACCOUNT_HTML), type: 'text/html; charset=utf-8' },
  '/account/app.js': { body: Buffer.from(ACCOUNT_JS), type: 'text/javascript; charset=utf-8' },
  '/account/app.css': { body: Buffer.from(ACCOUNT_CSS), type: 'text/css; charset=utf-8' },
};

function serveAsset(ctx: Pick<ServerContext, 'config'>, path: string, req: IncomingMessage, res: ServerResponse): void {
  if (!ctx.config.playground) {
    throw new CutoutError('not_found', 'The playground and account pages are turned off on this server (--no-playground). The API lives under /api/v1; see /api/v1/openapi.json.');
  }
  const asset = ASSETS[path];
  res.writeHead(200, {
    'Content-Type': asset.type,
    'Content-Length': String(asset.body.length),
    'Content-Security-Policy': PLAYGROUND_CSP,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
    'Cache-Control': 'no-cache',
  });
  res.end(req.method === 'HEAD' ? undefined : asset.body);
}

/** Adds the playground routes to the app (they answer 404 when config.playground is false). */
export function registerPlayground<T extends Polka<any>>(app: T, ctx: Pick<ServerContext, 'config'>): T {
  for (const path of Object.keys(ASSETS)) {
    app.get(path, (req, res) => serveAsset(ctx, path, req, res));
    app.head(path, (req, res) => serveAsset(ctx, path, req, res));
  }
  return app;
}
