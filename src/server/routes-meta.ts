/** GET /api/v1/health (no auth, always 200 while up) and GET /api/v1/openapi.json. */
import type { ServerResponse } from 'node:http';
import { openapiDocument } from './openapi.js';
import { sendJson } from './http.js';
import type { AppContext } from './app.js';

/**
 * The queue as health shows it. `queued` and `processing` count both kinds of work: jobs from the
 * store (so jobs waiting across a restart count) and sync requests waiting for or holding a slot.
 * `jobs` and `sync` give each kind on its own.
 */
async function queueState(ctx: AppContext) {
  const pool = ctx.pool.stats();
  // Always 200 while up: if the store cannot answer (closing), the in-memory view stands in.
  const jobs = await ctx.store.jobCounts().catch(() => ({ queued: pool.jobs.waiting, processing: pool.jobs.running }));
  return {
    queued: jobs.queued + pool.sync.waiting,
    processing: jobs.processing + pool.sync.running,
    jobs,
    sync: pool.sync,
  };
}

export async function handleHealth(ctx: AppContext, res: ServerResponse): Promise<void> {
  sendJson(res, 200, {
    status: 'ok',
    // The model loads on the first request, so a cold process still serves: "local" is ready.
    inference: ctx.upstream ? 'upstream' : 'local',
    // The upstream's URL (no credentials) and whether /v2/health/ready answered 200 (cached briefly).
    ...(ctx.upstream ? { upstream: await ctx.upstream.health() } : {}),
    version: ctx.version,
    model: ctx.config.model,
    workers: ctx.pool.size,
    queue: await queueState(ctx),
  }, { 'Cache-Control': 'no-store' });
}

export function handleOpenapi(res: ServerResponse): void {
  sendJson(res, 200, openapiDocument);
}
