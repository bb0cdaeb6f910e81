/**
 * The server's parts, one set per running server (startServing builds it). Routes take the narrow
 * part they use (`Pick<ServerContext, ...>`), never the whole; this file imports no route, so no
 * route file imports back into app.ts.
 */
import type { Logger } from 'pino';
import type { CutoutConfig } from '../config.js';
import type { UpstreamHealth } from '../oip/client.js';
import type { Pipeline } from '../pipeline/types.js';
import type { CallbackDispatcher } from '../queue/callbacks.js';
import type { WorkPool } from '../queue/pool.js';
import type { JobRunner } from '../queue/runner.js';
import type { RemovalService } from '../service/removal.js';
import type { Store } from '../store/db.js';
import type { Idempotency, RateLimiter } from './guards.js';
import type { ServerMetrics } from './metrics.js';
import type { StoreReadiness } from './readiness.js';
import type { Tracing } from '../telemetry/tracing.js';

export interface ServerContext {
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
  /** Remove, charge and record: what the sync route and the job workers call. */
  removals: RemovalService;
  /** `{base_url}` without a trailing slash; set once the port is bound. */
  baseUrl: string;
  version: string;
  marketplaceSecret: string | null;
  /** Null under --no-metrics. */
  metrics: ServerMetrics | null;
  /** The Open Inference Protocol server that runs the model (`--upstream`); null: local. */
  upstream: { health(): Promise<UpstreamHealth> } | null;
  /** Whether the store answers now (`/readyz`, the readiness metric). */
  readiness: StoreReadiness;
  /** Traces (src/telemetry/): made once at start; NO_TRACING unless OTLP export is configured. */
  tracing: Tracing;
  /** The JSON log on stdout: the request log's lines and the audit trail's. */
  logger: Logger;
  /** With `--preload`: the model being loaded, named by /readyz until it is (null: loaded on first use). */
  preload: { model: string; loaded: boolean } | null;
}
