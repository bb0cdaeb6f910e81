/** GET /api/v1/health (no auth, always 200 while up), GET /readyz, GET /api/v1/openapi.json and GET /metrics. */
import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CutoutError } from '../errors.js';
import { serverIdentity } from '../identity.js';
import { LIMITS } from '../limits.js';
import { withTimeout } from './readiness.js';
import { openapiDocument } from './v1/openapi.js';
import { sendError, sendJson } from './http.js';
import type { ServerContext } from './context.js';
import type { ServerMetrics } from './metrics.js';

/**
 * The queue as health shows it. `queued` and `processing` count both kinds of work: jobs from the
 * store (so jobs waiting across a restart count) and sync requests waiting for or holding a slot.
 * `jobs` and `sync` give each kind on its own.
 */
async function queueState(ctx: Pick<ServerContext, 'pool' | 'store'>) {
  const pool = ctx.pool.stats();
  // Always 200 while up, and at once: if the store cannot answer within a moment (closing,
  // frozen, unreachable), this server's in-memory view stands in. Readiness is /readyz's to say.
  const jobs = await withTimeout(ctx.store.jobs.counts(), LIMITS.healthStoreTimeoutMs)
    .catch(() => ({ queued: pool.jobs.waiting, processing: pool.jobs.running }));
  return {
    queued: jobs.queued + pool.sync.waiting,
    processing: jobs.processing + pool.sync.running,
    jobs,
    sync: pool.sync,
  };
}

export async function handleHealth(ctx: Pick<ServerContext, 'pool' | 'store' | 'upstream' | 'version' | 'config'>, res: ServerResponse): Promise<void> {
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
    store: ctx.store.kind,
    // Which server of a fleet answered: the identity its leases and claims carry.
    server: serverIdentity(),
  }, { 'Cache-Control': 'no-store' });
}

/** GET /readyz. */
export async function handleReady(ctx: Pick<ServerContext, 'readiness' | 'upstream' | 'jobs' | 'preload'>, res: ServerResponse): Promise<void> {
  const [store, results, upstream] = await Promise.all([
    ctx.readiness.check(),
    ctx.readiness.checkResults(),
    ctx.upstream ? ctx.upstream.health().then((h) => h.ready, () => false) : Promise.resolve(true),
  ]);
  const notReady: Record<string, string> = {};
  if (!store.ready) notReady.store = store.reason;
  if (results && !results.ready) notReady.results = results.reason;
  if (!upstream) notReady.upstream = 'the upstream inference server is not ready';
  if (ctx.preload && !ctx.preload.loaded) notReady.model = `the model ${ctx.preload.model} is loading`;
  if (ctx.jobs.isStopping) notReady.server = 'the server is shutting down';
  const ready = Object.keys(notReady).length === 0;
  sendJson(res, ready ? 200 : 503, {
    status: ready ? 'ready' : 'not_ready',
    checks: {
      store: store.ready ? 'ready' : 'not_ready',
      ...(results ? { results: results.ready ? 'ready' : 'not_ready' } : {}),
      ...(ctx.upstream ? { upstream: upstream ? 'ready' : 'not_ready' } : {}),
      ...(ctx.preload ? { model: ctx.preload.loaded ? 'ready' : 'not_ready' } : {}),
    },
    ...(ready ? {} : { not_ready: notReady }),
  }, { 'Cache-Control': 'no-store' });
}
export function handleOpenapi
(res: ServerResponse): void {
  sendJson(res, 200, openapiDocument);
}

/** Prometheus text format; no auth, like health (serve it on a network the scraper alone reaches). */
export async function handleMetrics(metrics: ServerMetrics, res: ServerResponse): Promise<void> {
  try {
    const { contentType, body } = await metrics.render();
    res.writeHead(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' });
    res.end(body);
  } catch (err) {
    // A scrape while the store closes: a failed scrape is what Prometheus should see.
    sendError(res, err);
  }
}

/**
 * `--metrics-port`: `/metrics` on a listener of its own, so the API port need not expose it (the
 * scraper alone reaches this one, as Triton serves its metrics on 8002). Anything else is a 404.
 */
export async function listenMetrics(metrics: ServerMetrics, host: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if ((req.method === 'GET' || req.method === 'HEAD') && path === '/metrics') void handleMetrics(metrics, res);
    else sendError(res, new CutoutError('not_found', 'This listener serves GET /metrics only.'));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}`,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
