/**
 * The v1 HTTP API: the polka app with our own error and not-found handlers, and `startServer`,
 * which opens the store, binds the port, runs the periodic purge and stops cleanly.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import polka from 'polka';
import type { CutoutConfig } from '../config.js';
import { CutoutError, toCutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { openStore, type Store } from '../store/db.js';
import { Idempotency, RateLimiter } from './guards.js';
import { sendError } from './http.js';
import { WorkPool } from './pool.js';
import { handleAccount, handleUsage } from './routes-account.js';
import { handleHealth, handleOpenapi } from './routes-meta.js';
import { handleRemove } from './routes-remove.js';
import { handleResult } from './routes-results.js';

export type Pipeline = Pick<typeof import('../pipeline/index.js'), 'removeBackground' | 'probeImage'>;

/** Everything a handler needs; one per running server. */
export interface AppContext {
  config: Readonly<CutoutConfig>;
  store: Store;
  pool: WorkPool;
  limiter: RateLimiter;
  idempotency: Idempotency;
  pipeline: Pipeline;
  /** `{base_url}` without a trailing slash. */
  baseUrl: string;
  version: string;
  marketplaceSecret: string | null;
}

const VERSION = (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** Builds the polka app over a context. Every handler may throw; onError turns it into the part 7 body. */
export function createApp(ctx: AppContext) {
  const app = polka({
    onError(err, req, res) {
      if (!(err instanceof CutoutError)) {
        // The operator sees the cause; the client gets processing_failed without internals.
        process.stderr.write(`cutout serve: unexpected error on ${req.method} ${req.path}: ${(err as Error)?.stack ?? String(err)}\n`);
      }
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendError(res, toCutoutError(err));
    },
    onNoMatch(req, res) {
      sendError(res, new CutoutError('not_found', `No route ${req.method} ${req.path}. The API lives under /api/v1; see /api/v1/openapi.json.`));
    },
  });
  const v1 = '/api/v1';
  app.post(`${v1}/remove`, (req, res) => handleRemove(ctx, req, res));
  app.get(`${v1}/results/:job_id`, (req, res) => handleResult(ctx, req.params.job_id, res));
  app.get(`${v1}/account`, (req, res) => handleAccount(ctx, req, res));
  app.get(`${v1}/usage`, (req, res) => handleUsage(ctx, req, res));
  app.get(`${v1}/health`, (_req, res) => handleHealth(ctx, res));
  app.get(`${v1}/openapi.json`, (_req, res) => handleOpenapi(res));
  return app;
}

export interface RunningServer {
  /** http://host:port as bound (the real port when 0 was asked). */
  url: string;
  host: string;
  port: number;
  context: AppContext;
  /** Stops taking connections, lets running requests finish, then closes the store. Idempotent. */
  close(): Promise<void>;
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** How often expired results and idempotency keys are purged: often enough for a short --result-ttl. */
function purgeIntervalMs(ttlSeconds: number): number {
  return Math.min(60_000, Math.max(1_000, Math.floor((ttlSeconds * 1000) / 2)));
}

export async function startServer(config: Readonly<CutoutConfig>, options: { pipeline?: Pipeline } = {}): Promise<RunningServer> {
  const pipeline = options.pipeline ?? (await loadPipeline(config.model));
  const store = await openStore(config.dataDir);
  // Replays need their stored result: the window is the shorter of 24 h and the result retention.
  const idempotencyTtl = Math.min(LIMITS.idempotencyTtlSeconds, config.resultTtlSeconds);
  await store.resetIdempotencyKeys(idempotencyTtl);

  const server = http.createServer();
  const context: AppContext = {
    config, store, pipeline,
    pool: new WorkPool(config.workers),
    limiter: new RateLimiter(config.rateLimit),
    idempotency: new Idempotency(store, idempotencyTtl),
    baseUrl: '',
    version: VERSION,
    marketplaceSecret: config.marketplaceSecret,
  };
  const app = createApp(context);
  server.on('request', app.handler);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await store.close();
    throw new CutoutError('invalid_request', `Cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`, { cause: err });
  }
  const { port } = server.address() as AddressInfo;
  const url = `http://${hostForUrl(config.host)}:${port}`;
  context.baseUrl = config.baseUrl ?? url;

  const purge = async () => {
    try {
      await store.purgeResults(config.resultTtlSeconds);
      await store.purgeIdempotencyKeys(idempotencyTtl);
      context.limiter.sweep();
    } catch (err) {
      process.stderr.write(`cutout serve: purge failed: ${(err as Error).message}\n`);
    }
  };
  void purge();
  const purgeTimer = setInterval(() => void purge(), purgeIntervalMs(config.resultTtlSeconds));
  purgeTimer.unref();

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      clearInterval(purgeTimer);
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // Requests already in flight finish (their inference included), then the store can go.
      await context.pool.drain();
      await stopped;
      await store.close();
      await stopModelsIfLoaded();
    })();
    return closing;
  };
  return { url, host: config.host, port, context, close };
}

let pipelineModule: typeof import('../pipeline/index.js') | null = null;

/** Loads the pipeline (sharp, onnxruntime) only when a server starts, and checks the model exists. */
async function loadPipeline(model: string): Promise<Pipeline> {
  pipelineModule ??= await import('../pipeline/index.js');
  pipelineModule.setDefaultModel(model);
  pipelineModule.resolveModel(model);
  return pipelineModule;
}

async function stopModelsIfLoaded(): Promise<void> {
  if (pipelineModule) await pipelineModule.stopModels();
}
