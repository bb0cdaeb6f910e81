/**
 * The v1 HTTP API: the polka app with our own error and not-found handlers, and `startServer`,
 * which opens the store, binds the port, runs the periodic purge and stops cleanly.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import polka, { type Middleware, type Polka } from 'polka';
import type { CutoutConfig } from '../config.js';
import type { Pipeline } from '../pipeline/types.js';
import type { CutoutPipeline, RemoteInference } from '../pipeline/index.js';
import { CutoutError, toCutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { openStore, type Store } from '../store/db.js';
import { Idempotency, RateLimiter } from './guards.js';
import { answerClientError, linkErrorDocs, sendError } from './http.js';
import { WorkPool } from '../queue/pool.js';
import { handleAccount, handleUsage } from './routes-account.js';
import { handleHealth, handleMetrics, handleOpenapi, listenMetrics } from './routes-meta.js';
import { handleReady, StoreReadiness } from './readiness.js';
import { redactedPath } from './request-log.js';
import { handleRemove } from './routes-remove.js';
import { handleResult } from './routes-results.js';
import { handleCreateBatch, handleCreateJob, handleGetJob } from './routes-jobs.js';
import { CallbackDispatcher } from '../queue/callbacks.js';
import { JobRunner } from '../queue/runner.js';
import { serverIdentity } from '../identity.js';
import { ServerMetrics, setRoutePattern } from './metrics.js';
import { assignRequestId, createLogger, createRequestLogger } from './request-log.js';
import { callbackSecretOf } from '../queue/secret.js';
import { registerPlayground } from './routes-playground.js';
import { handleErrors } from './routes-errors.js';

/** Everything a handler needs; one per running server. */
export interface AppContext {
  config: Readonly<CutoutConfig>;
  store: Store;
  pool: WorkPool;
  /** The job workers of the durable queue (share `pool` with the sync route). */
  jobs: JobRunner;
  /** Delivers the stored job callbacks. */
  callbacks: CallbackDispatcher;
  limiter: RateLimiter;
  idempotency: Idempotency;
  pipeline: Pipeline;
  /** `{base_url}` without a trailing slash. */
  baseUrl: string;
  version: string;
  marketplaceSecret: string | null;
  /** Null under --no-metrics. */
  metrics: ServerMetrics | null;
  /** The Open Inference Protocol server that runs the model (`--upstream`); null: local. */
  upstream: { health(): Promise<import('../oip/client.js').UpstreamHealth> } | null;
  /** Whether the store answers now (`/readyz`, the readiness metric). */
  readiness: StoreReadiness;
}

const VERSION = (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** Builds the polka app over a context. Every handler may throw; onError turns it into the part 7 body. */
export function createApp(ctx: AppContext) {
  const app = polka({
    onError(err, req, res) {
      if (!(err instanceof CutoutError)) {
        // The operator sees the cause; the client gets processing_failed without internals. The
        // path without its ids: a result's is its capability URL.
        process.stderr.write(`cutout serve: unexpected error on ${req.method} ${redactedPath(req)}: ${(err as Error)?.stack ?? String(err)}\n`);
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
  tagRoutePatterns(app);
  const v1 = '/api/v1';
  app.post(`${v1}/remove`, (req, res) => handleRemove(ctx, req, res));
  app.get(`${v1}/results/:job_id`, (req, res) => handleResult(ctx, req.params.job_id, res));
  app.post(`${v1}/jobs`, (req, res) => handleCreateJob(ctx, req, res));
  app.post(`${v1}/jobs/batch`, (req, res) => handleCreateBatch(ctx, req, res));
  app.get(`${v1}/jobs/:job_id`, (req, res) => handleGetJob(ctx, req, res, req.params.job_id));
  app.get(`${v1}/account`, (req, res) => handleAccount(ctx, req, res));
  app.get(`${v1}/usage`, (req, res) => handleUsage(ctx, req, res));
  app.get(`${v1}/health`, (_req, res) => handleHealth(ctx, res));
  app.get('/readyz', (_req, res) => handleReady(ctx, res));
  app.get(`${v1}/openapi.json`, (_req, res) => handleOpenapi(res));
  app.get(`${v1}/errors`, (req, res) => handleErrors(ctx, req, res)); // what every error's `docs` links to
  // With --metrics-port, /metrics has a listener of its own (startServing).
  if (ctx.metrics && ctx.config.metricsPort === null) app.get('/metrics', (_req, res) => handleMetrics(ctx.metrics!, res));
  registerPlayground(app, ctx); // GET / (the web playground; 404 under --no-playground)
  return app;
}

/**
 * Makes every route registered on `app` remember its pattern on the request (polka keeps only a
 * compiled RegExp), for the metrics' and the log's `route`: a bounded set of values.
 */
function tagRoutePatterns(app: Polka): void {
  for (const method of ['get', 'head', 'post', 'put', 'patch', 'delete'] as const) {
    const register = app[method].bind(app);
    app[method] = ((pattern: string, ...handlers: Middleware[]) =>
      register(pattern, (req, _res, next) => {
        setRoutePattern(req, pattern);
        next();
      }, ...handlers)) as typeof app[typeof method];
  }
}

export interface RunningServer {
  /** http://host:port as bound (the real port when 0 was asked). */
  url: string;
  host: string;
  port: number;
  /** http://host:port of the --metrics-port listener; null: /metrics is on the API port (or off). */
  metricsUrl: string | null;
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

/** How long a stop lets running jobs finish before putting them back in the queue. */
export const JOB_STOP_GRACE_MS = 20_000;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * Starts the server with a pipeline of its own (its model, precision and model call, local or
 * upstream, chosen once here), closed with the server: two servers in one process (tests, an
 * embedding) never share or undo each other's configuration.
 */
export async function startServer(config: Readonly<CutoutConfig>): Promise<RunningServer> {
  // The model call is chosen once, here: an upstream is checked before the port opens.
  const upstream = config.upstream ? await (await import('../oip/client.js')).connectConfiguredUpstream({ ...config, upstream: config.upstream }) : null;
  const loaded = await loadPipeline(config, upstream);
  try {
    return await startServing(config, loaded, upstream);
  } catch (err) {
    await loaded.close();
    throw err;
  }
}

async function startServing(
  config: Readonly<CutoutConfig>, loaded: CutoutPipeline, upstream: Awaited<ReturnType<typeof import('../oip/client.js').connectConfiguredUpstream>> | null,
): Promise<RunningServer> {
  const store = await openStore(config.dataDir, { url: config.store, results: config.results, resultsPathStyle: config.resultsPathStyle });
  // Replays need their stored result: the window is the shorter of 24 h and the result retention.
  const idempotencyTtl = Math.min(LIMITS.idempotencyTtlSeconds, config.resultTtlSeconds);
  let callbackSecret: string;
  try {
    // The heartbeat tells the other servers of a fleet that this one runs (its claims stay its own).
    await store.startHeartbeat(config.leaseMs);
    await store.resetIdempotencyKeys(idempotencyTtl);
    callbackSecret = await callbackSecretOf(store, config.callbackSecret);
  } catch (err) {
    // An open PostgreSQL pool would keep the failed start alive.
    await store.close().catch(() => undefined);
    throw err;
  }
  const pool = new WorkPool(config.workers);
  const readiness = new StoreReadiness(store);
  const metrics = config.metrics ? new ServerMetrics({ store, pool, readiness }) : null;
  // The sync route and the job workers call the same (observed) pipeline.
  const pipeline = metrics ? metrics.observePipeline(loaded) : loaded;
  const callbacks = new CallbackDispatcher({
    store, secret: callbackSecret, firstDelayMs: config.callbackBackoffMs, allowPrivateNetwork: config.allowPrivateNetwork,
    onAttempt: (outcome) => metrics?.countCallbackAttempt(outcome),
  });
  const jobs = new JobRunner({
    store, pool, pipeline, config,
    resultUrl: (id) => `${context.baseUrl}/api/v1/results/${id}`,
    onFinished: () => callbacks.kick(),
    leaseMs: config.leaseMs,
  });

  const server = http.createServer();
  const context: AppContext = {
    config, store, pipeline, pool, jobs, callbacks,
    limiter: new RateLimiter(store, config.rateLimit),
    // A request holds its key at most the sync deadline (which covers an image_url fetch) plus its
    // commit: 15 s of margin for that.
    idempotency: new Idempotency(store, idempotencyTtl, config.syncTimeoutMs + LIMITS.fetchTimeoutMs),
    baseUrl: '',
    version: VERSION,
    marketplaceSecret: config.marketplaceSecret,
    metrics,
    upstream,
    readiness,
  };
  const app = createApp(context);
  const requestLog = createRequestLogger(createLogger(config.logLevel, serverIdentity()));
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    // The id first, so that every answer carries it (errors and 404s too).
    assignRequestId(req, res);
    linkErrorDocs(res, context.baseUrl);
    metrics?.observeRequest(req, res);
    requestLog(req, res);
    (app.handler as (req: http.IncomingMessage, res: http.ServerResponse) => void)(req, res);
  });
  server.on('clientError', (err: Error & { code?: string }, socket: import('node:stream').Duplex) => answerClientError(err, socket, context.baseUrl));
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
  // --metrics-port: /metrics on a listener of its own.
  let metricsListener: Awaited<ReturnType<typeof listenMetrics>> | null = null;
  if (metrics && config.metricsPort !== null) {
    const metricsHost = config.metricsHost ?? config.host;
    try {
      metricsListener = await listenMetrics(metrics, metricsHost, config.metricsPort);
    } catch (err) {
      server.close();
      await store.close();
      throw new CutoutError('invalid_request', `Cannot listen on ${metricsHost}:${config.metricsPort} for metrics: ${(err as Error).message}`, { cause: err });
    }
  }
  const { port } = server.address() as AddressInfo;
  const url = `http://${hostForUrl(config.host)}:${port}`;
  context.baseUrl = config.baseUrl ?? url;

  const purge = async () => {
    try {
      await store.purgeResults(config.resultTtlSeconds);
      await store.purgeIdempotencyKeys(idempotencyTtl);
      await store.purgeJobs(config.resultTtlSeconds);
      await store.removeOrphanJobInputs();
      await context.limiter.sweep();
    } catch (err) {
      process.stderr.write(`cutout serve: purge failed: ${(err as Error).message}\n`);
    }
  };
  void purge();
  const purgeTimer = setInterval(() => void purge(), purgeIntervalMs(config.resultTtlSeconds));
  purgeTimer.unref();

  // The queue: jobs a crash left processing go back to queued, then the workers and the
  // callback deliveries (pending ones included) start.
  try {
    await jobs.start();
    callbacks.start();
  } catch (err) {
    clearInterval(purgeTimer);
    server.close();
    await metricsListener?.close();
    await store.close();
    throw err;
  }

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      clearInterval(purgeTimer);
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // No new jobs are claimed; running jobs get a bounded grace period, then go back to the
      // queue; queued jobs stay queued for the next start.
      const deadline = Date.now() + JOB_STOP_GRACE_MS;
      await jobs.stop(JOB_STOP_GRACE_MS);
      // Requests already in flight finish (their inference included), then the store can go. A job
      // put back in the queue may still hold its slot until its model call returns: that is not
      // waited for past the grace period (it commits nothing).
      await Promise.race([context.pool.drain(), delay(Math.max(1000, deadline - Date.now()))]);
      // Attempts in flight end within their timeout and are recorded, never handed back mid-send.
      await callbacks.stop();
      await stopped;
      await metricsListener?.close();
      await store.close();
      await loaded.close();
    })();
    return closing;
  };
  return { url, host: config.host, port, metricsUrl: metricsListener?.url ?? null, context, close };
}

/** Loads the pipeline's modules (sharp, onnxruntime) only when a server starts; the model is checked here. */
async function loadPipeline(config: Readonly<CutoutConfig>, upstream: RemoteInference | null): Promise<CutoutPipeline> {
  const { createPipeline } = await import('../pipeline/index.js');
  return createPipeline({
    model: config.model,
    precision: config.precision,
    dataDir: config.dataDir,
    upstream: upstream ?? undefined,
    inferenceWorkers: config.inferenceWorkers,
    threads: config.inferenceThreads,
    onPreparation: (event) => {
      if (event.state === 'start') process.stderr.write(`cutout serve: preparing model ${event.model} (${event.step}) for its first use; nothing is downloaded\n`);
    },
  });
}
