/** GET /api/v1/health (no auth, always 200 while up) and GET /api/v1/openapi.json. */
import type { ServerResponse } from 'node:http';
import { openapiDocument } from './openapi.js';
import { sendJson } from './http.js';
import type { AppContext } from './app.js';

export function handleHealth(ctx: AppContext, res: ServerResponse): void {
  sendJson(res, 200, {
    status: 'ok',
    // The model loads on the first request, so a cold process still serves: "local" is ready.
    inference: 'local',
    version: ctx.version,
    model: ctx.config.model,
    workers: ctx.pool.size,
    queue: ctx.pool.stats(),
  }, { 'Cache-Control': 'no-store' });
}

export function handleOpenapi(res: ServerResponse): void {
  sendJson(res, 200, openapiDocument);
}
