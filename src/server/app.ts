/**
 * The HTTP server: the polka app with the APIs mounted as plugins (plugin.ts; v1 in api-v1.ts),
 * the operator's routes (/readyz, /metrics, the playground), and `startServer`, which opens the
 * store, binds the port, runs the periodic purge and the queue, and stops cleanly.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import polka, { type Middleware, type Polka } from 'polka';
import type { CutoutConfig } from '../config.js';
import type { CutoutPipeline, Inference, RemoteInference } from '../pipeline/index.js';
import { CutoutError, toCutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { openStore, type Store } from '../store/db.js';
import { Idempotency, RateLimiter } from './guards.js';
import { answerClientError, linkErrorDocs } from './http.js';
import { WorkPool } from '../queue/pool.js';
import { handleMetrics, handleReady, listenMetrics } from './routes-meta.js';
import { StoreReadiness } from './readiness.js';
import { redactedPath } from './request-log.js';
import { CallbackDispatcher } from '../queue/callbacks.js';
import { JobRunner } from '../queue/runner.js';
import { RemovalService } from '../service/removal.js';
import { serverIdentity } from '../identity.js';
import { ServerMetrics, setRoutePattern } from './metrics.js';
import { assignRequestId, createLogger, createRequestLogger } from './request-log.js';
import { callbackSecretOf } from '../queue/secret.js';
import { registerPlayground } from './routes-playground.js';
import { v1Api, v1NotFound } from './v1/api-v1.js';
import { rembgApi } from './dialects/api-rembg.js';
import { removeBgApi } from './dialects/api-removebg.js';
import { photoroomApis } from './dialects/api-photoroom.js';
import { clipdropApi } from './dialects/api-clipdrop.js';
import { adminApi } from './admin/api-admin.js';
import { applyCors, limiterOf, mountApi, pluginFor, type ApiPlugin } from './plugin.js';
import { startTracing, type Tracing } from '../telemetry/tracing.js';
import { traced, traceRequest } from './request-span.js';
import type { ServerContext } from './context.js';

export type { ServerContext } from './context.js';
/** The former name of ServerContext. */
export type AppContext = ServerContext;

const VERSION = (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/**
 * The APIs a server mounts: v1, remove.bg's and rembg's dialects unless `--no-removebg`,
 * Photoroom's unless `--no-photoroom`, Clipdrop's unless `--no-clipdrop`. Their prefixes do not
 * overlap (`/api/v1`, `/v1.0`, `/api/remove`, `/v1` and `/v2`, `/remove-background`; the longest
 * prefix owns a path, and `/v1.0/...` is not under `/v1/`).
 */
export function serverApis(ctx: ServerContext): ApiPlugin[] {
  return [
    v1Api(ctx),
    ...(ctx.config.removebg ? [removeBgApi(ctx), rembgApi(ctx)] : []),
    ...(ctx.config.photoroom ? photoroomApis(ctx) : []),
    ...(ctx.config.clipdrop ? [clipdropApi(ctx)] : []),
    // The admin API exists only with an admin token; without one its paths are v1's 404s.
    ...(ctx.config.adminToken ? [adminApi(ctx)] : []),
  ];
}

/**
 * Builds the polka app over a context, with the APIs given (default: those of `serverApis`). Every handler may
 * throw; onError renders it in the body of the API the path belongs to (v1's outside every API).
 */
export function createApp(ctx: ServerContext, apis: readonly ApiPlugin[] = serverApis(ctx)) {
  const fallback = apis.find((api) => api.name === 'v1') ?? v1Api(ctx);
  const apiOf = (path: string) => pluginFor(apis, path) ?? fallback;
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
      apiOf(req.path).renderError(res, toCutoutError(err));
    },
    onNoMatch(req, res) {
      const api = pluginFor(apis, req.path);
      if (api) api.renderError(res, api.notFound(req));
      else fallback.renderError(res, v1NotFound(req.method, req.path));
    },
  });
  tagRoutePatterns(app);
  // Before every route: a dialect's cross-origin headers on all its answers, errors included.
  app.use((req, res, next) => {
    applyCors(pluginFor(apis, req.path), res);
    next();
  });
  // Each API's callers count against the shared limit, or against its own (ApiPlugin.limits).
  for (const api of apis) mountApi(app, api, limiterOf(api, ctx.limiter));
  app.get('/readyz', (_req, res) => handleReady(ctx, res));
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
  for (const method of ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'] as const) {
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
  context: ServerContext;
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

type Upstream = Awaited<ReturnType<typeof import('../oip/client.js').connectConfiguredUpstream>>;

/** What an embedding (or a test) may hand the server in place of what the config would build. */
export interface ServerSeams {
  /**
   * The pipeline's model call (PipelineOptions.inference), in place of the local model or the
   * upstream: the API tests whose subject is not the model run a stand-in through it.
   */
  inference?: Inference;
  /**
   * The APIs to mount, in place of `serverApis` (an embedding's own dialect, or one with limits
   * of its own: ApiPlugin.limits).
   */
  apis?: (ctx: ServerContext) => ApiPlugin[];
}

/**
 * Starts the server with a pipeline of its own (its model, precision and model call, local or
 * upstream, chosen once here), closed with the server: two servers in one process (tests, an
 * embedding) never share or undo each other's configuration.
 */
export async function startServer(config: Readonly<CutoutConfig>, seams: ServerSeams = {}): Promise<RunningServer> {
  // The model call is chosen once, here: an upstream is checked before the port opens.
  // Traces: NO_TRACING unless the OTEL_* variables ask for OTLP export (the SDK is loaded only then).
  const tracing = await startTracing({ name: 'cutout', version: VERSION });
  try {
    const upstream = config.upstream ? await (await import('../oip/client.js')).connectConfiguredUpstream({ ...config, upstream: config.upstream }, { tracing }) : null;
    const loaded = await loadPipeline(config, upstream, seams.inference);
    try {
      return await startServing(config, loaded, upstream, seams.apis, tracing);
    } catch (err) {
      await loaded.close();
      throw err;
    }
  } catch (err) {
    await tracing.shutdown();
    throw err;
  }
}

/** Replays need their stored result: the window is the shorter of 24 h and the result retention. */
function idempotencyTtlOf(config: Readonly<CutoutConfig>): number {
  return Math.min(LIMITS.idempotencyTtlSeconds, config.resultTtlSeconds);
}

/** Opens the store and announces this server in it; returns the callback signing secret too. */
async function openServerStore(config: Readonly<CutoutConfig>): Promise<{ store: Store; callbackSecret: string }> {
  const store = await openStore(config.dataDir, { url: config.store, results: config.results, resultsPathStyle: config.resultsPathStyle });
  try {
    // The heartbeat tells the other servers of a fleet that this one runs (its claims stay its own).
    await store.fleet.startHeartbeat(config.leaseMs);
    await store.idempotency.reset(idempotencyTtlOf(config));
    return { store, callbackSecret: await callbackSecretOf(store, config.callbackSecret) };
  } catch (err) {
    // An open PostgreSQL pool would keep the failed start alive.
    await store.close().catch(() => undefined);
    throw err;
  }
}

/** The server's parts over an open store; `baseUrl` is filled in once the port is bound. */
function buildContext(config: Readonly<CutoutConfig>, store: Store, callbackSecret: string, loaded: CutoutPipeline, upstream: Upstream | null, tracing: Tracing): ServerContext {
  const pool = new WorkPool(config.workers);
  const readiness = new StoreReadiness(store);
  const metrics = config.metrics ? new ServerMetrics({ store, pool, readiness }) : null;
  // The sync route and the job workers call the same (observed) pipeline.
  const pipeline = metrics ? metrics.observePipeline(loaded) : loaded;
  const callbacks = new CallbackDispatcher({
    store, secret: callbackSecret, firstDelayMs: config.callbackBackoffMs, allowPrivateNetwork: config.allowPrivateNetwork,
    onAttempt: (outcome) => metrics?.countCallbackAttempt(outcome),
    tracing,
  });
  const removals = new RemovalService({
    pipeline, store, tracing,
    // An upstream's client traces its own calls (the model server's spans join them).
    inferenceTracedByCaller: Boolean(upstream),
    onCharged: (channel, charged) => metrics?.countCredits(channel, charged.creditsCharged),
  });
  const jobs = new JobRunner({
    store, pool, removals, config,
    resultUrl: (id) => `${context.baseUrl}/api/v1/results/${id}`,
    onFinished: () => callbacks.kick(),
    leaseMs: config.leaseMs,
    tracing,
  });
  const context: ServerContext = {
    config, store, pipeline, removals, pool, jobs, callbacks,
    limiter: new RateLimiter(store, config.rateLimit),
    // A request holds its key at most the sync deadline (which covers an image_url fetch) plus its
    // commit: 15 s of margin for that.
    idempotency: new Idempotency(store, idempotencyTtlOf(config), config.syncTimeoutMs + LIMITS.fetchTimeoutMs),
    baseUrl: '',
    version: VERSION,
    marketplaceSecret: config.marketplaceSecret,
    metrics,
    upstream,
    readiness,
    tracing,
    // The request log's logger, shared by the audit trail's lines (one stream, one format).
    logger: createLogger(config.logLevel, serverIdentity()),
    // Loaded by startServing after the port opens; an upstream loads its own model.
    preload: config.preload && !upstream ? { model: loaded.manifest.name, loaded: false } : null,
  };
  return context;
}

/** The HTTP server over the app: each request gets its id, its docs base, its metrics and its log line. */
function createHttpServer(context: ServerContext, apis: ServerSeams['apis']): http.Server {
  const server = http.createServer();
  const mounted = apis?.(context) ?? serverApis(context);
  const app = createApp(context, mounted);
  const { tracing } = context;
  const doorOf = (path: string) => pluginFor(mounted, path)?.name ?? 'none';
  const requestLog = createRequestLogger(context.logger);
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    // The id first, so that every answer carries it (errors and 404s too).
    assignRequestId(req, res);
    linkErrorDocs(res, context.baseUrl);
    context.metrics?.observeRequest(req, res);
    // The probes answered while --preload loads the model go unlogged: the listening line, printed
    // once it is loaded, stays the first line on stdout for the scripts that wait for it.
    if (!context.preload || context.preload.loaded) requestLog(req, res);
    const handle = () => (app.handler as (req: http.IncomingMessage, res: http.ServerResponse) => void)(req, res);
    // The handlers run inside the request's span: the removal's spans become its children.
    if (tracing.enabled && traced(req)) tracing.within(traceRequest(tracing, req, res, doorOf), handle);
    else handle();
  });
  server.on('clientError', (err: Error & { code?: string }, socket: import('node:stream').Duplex) => answerClientError(err, socket, context.baseUrl));
  return server;
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** `--metrics-port`: /metrics on a listener of its own; null when not asked. */
async function listenMetricsIfAsked(context: ServerContext): Promise<Awaited<ReturnType<typeof listenMetrics>> | null> {
  const { config, metrics } = context;
  if (!metrics || config.metricsPort === null) return null;
  const metricsHost = config.metricsHost ?? config.host;
  try {
    return await listenMetrics(metrics, metricsHost, config.metricsPort);
  } catch (err) {
    throw new CutoutError('invalid_request', `Cannot listen on ${metricsHost}:${config.metricsPort} for metrics: ${(err as Error).message}`, { cause: err });
  }
}

/** Purges expired results, idempotency keys, jobs, orphan inputs and rate windows now and periodically. */
function startPurge(context: ServerContext): NodeJS.Timeout {
  const { config, store } = context;
  const purge = async () => {
    try {
      await store.results.purge(config.resultTtlSeconds);
      await store.idempotency.purge(idempotencyTtlOf(config));
      await store.jobs.purge(config.resultTtlSeconds);
      await store.jobs.removeOrphanInputs();
      await context.limiter.sweep();
    } catch (err) {
      process.stderr.write(`cutout serve: purge failed: ${(err as Error).message}\n`);
    }
  };
  void purge();
  const timer = setInterval(() => void purge(), purgeIntervalMs(config.resultTtlSeconds));
  timer.unref();
  return timer;
}

async function startServing(config: Readonly<CutoutConfig>, loaded: CutoutPipeline, upstream: Upstream | null, apis: ServerSeams['apis'], tracing: Tracing): Promise<RunningServer> {
  const { store, callbackSecret } = await openServerStore(config);
  const context = buildContext(config, store, callbackSecret, loaded, upstream, tracing);
  const server = createHttpServer(context, apis);
  try {
    await listen(server, config.port, config.host);
  } catch (err) {
    await store.close();
    throw new CutoutError('invalid_request', `Cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`, { cause: err });
  }
  let metricsListener: Awaited<ReturnType<typeof listenMetrics>> | null;
  try {
    metricsListener = await listenMetricsIfAsked(context);
  } catch (err) {
    server.close();
    await store.close();
    throw err;
  }
  const { port } = server.address() as AddressInfo;
  const url = `http://${hostForUrl(config.host)}:${port}`;
  context.baseUrl = config.baseUrl ?? url;
  const purgeTimer = startPurge(context);

  // The queue: jobs a crash left processing go back to queued, then the workers and the
  // callback deliveries (pending ones included) start.
  try {
    await context.jobs.start();
    context.callbacks.start();
  } catch (err) {
    clearInterval(purgeTimer);
    server.close();
    await metricsListener?.close();
    await store.close();
    throw err;
  }
  const close = stopper(context, server, loaded, purgeTimer, metricsListener);
  if (context.preload) {
    // The port is open meanwhile, so that /readyz can say what it waits for (503 naming the model).
    try {
      await loaded.loadModel();
    } catch (err) {
      await close();
      throw err;
    }
    context.preload.loaded = true;
  }
  return { url, host: config.host, port, metricsUrl: metricsListener?.url ?? null, context, close };
}

/** The server's `close`: idempotent, in the order that loses no work. */
function stopper(
  context: ServerContext, server: http.Server, loaded: CutoutPipeline, purgeTimer: NodeJS.Timeout,
  metricsListener: { close(): Promise<void> } | null,
): () => Promise<void> {
  let closing: Promise<void> | null = null;
  return () => {
    closing ??= (async () => {
      clearInterval(purgeTimer);
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // No new jobs are claimed; running jobs get a bounded grace period, then go back to the
      // queue; queued jobs stay queued for the next start.
      const deadline = Date.now() + JOB_STOP_GRACE_MS;
      await context.jobs.stop(JOB_STOP_GRACE_MS);
      // Requests already in flight finish (their inference included), then the store can go. A job
      // put back in the queue may still hold its slot until its model call returns: that is not
      // waited for past the grace period (it commits nothing).
      await Promise.race([context.pool.drain(), delay(Math.max(1000, deadline - Date.now()))]);
      // Attempts in flight end within their timeout and are recorded, never handed back mid-send.
      await context.callbacks.stop();
      await stopped;
      await metricsListener?.close();
      await context.store.close();
      await loaded.close();
      // Last: the spans of everything above (the last callbacks included) are sent before the exit.
      await context.tracing.shutdown();
    })();
    return closing;
  };
}

/** Loads the pipeline's modules (sharp, onnxruntime) only when a server starts; the model is checked here. */
async function loadPipeline(config: Readonly<CutoutConfig>, upstream: RemoteInference | null, inference: Inference | undefined): Promise<CutoutPipeline> {
  const { createPipeline } = await import('../pipeline/index.js');
  return createPipeline({
    model: config.model,
    precision: config.precision,
    dataDir: config.dataDir,
    upstream: upstream ?? undefined,
    inference,
    inferenceWorkers: config.inferenceWorkers,
    threads: config.inferenceThreads,
    onPreparation: (event) => {
      if (event.state === 'start') process.stderr.write(`cutout serve: preparing model ${event.model} (${event.step}) for its first use; nothing is downloaded\n`);
    },
  });
}
