/**
 * Prometheus metrics of one running server (`GET /metrics`, text format 0.0.4, via prom-client).
 *
 * Each server has its own Registry, not prom-client's global one, so several servers can run in
 * one process (the tests do) without sharing or double-registering series.
 *
 * What is counted where:
 * - request durations: observed here when a response ends, labelled by the route PATTERN
 *   (`/api/v1/jobs/:job_id`), never the raw URL, so the label set stays bounded (and no result
 *   capability URL lands in a monitoring system);
 * - jobs by state and the job queue depth: read from the store at scrape time, so every server of
 *   a fleet reports the same, fleet-wide figure (aggregate them with max(), not sum());
 * - sync requests waiting for an inference slot and the slots in use: this server's own pool;
 * - inference time: from the timings the pipeline returns (the pipeline knows nothing of this);
 * - callback attempts by outcome: reported by the dispatcher through its `onAttempt` hook;
 * - the store's readiness (the probe of /readyz, bounded to 2 s) and this server's failed heartbeats.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Pipeline } from '../pipeline/types.js';
import type { WorkPool } from '../queue/pool.js';
import { LIMITS } from '../limits.js';
import type { Store } from '../store/db.js';
import type { FleetStore } from '../store/servers.js';
import type { JobStore } from '../store/jobs.js';
import type { ResultStore } from '../store/results.js';
import { withTimeout } from './readiness.js';

/** The label of a request that matched no route (404s): one value, whatever was asked. */
export const UNMATCHED_ROUTE = 'unmatched';

const ROUTE_PATTERN = Symbol('cutout.routePattern');
type Tagged = IncomingMessage & { [ROUTE_PATTERN]?: string };

/** Remembers which route pattern a request matched (set by the app's route registration). */
export function setRoutePattern(req: IncomingMessage, pattern: string): void {
  (req as Tagged)[ROUTE_PATTERN] = pattern;
}

/** The route pattern a request matched, or `unmatched`. */
export function routePatternOf(req: IncomingMessage): string {
  return (req as Tagged)[ROUTE_PATTERN] ?? UNMATCHED_ROUTE;
}

/** Fast API routes answer in milliseconds; the sync route can take up to its 30 s deadline. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** One model call: tens of milliseconds (fast, small) to tens of seconds (max quality, 50 MP). */
const INFERENCE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64];

export type CallbackOutcome = 'delivered' | 'retry' | 'gave_up';

export interface MetricsSources {
  store: Pick<Store, 'kind'> & { readonly jobs: Pick<JobStore, 'counts'>; readonly fleet: Pick<FleetStore, 'onHeartbeatFailure'>; readonly results?: Pick<ResultStore, 'kind'> };
  pool: Pick<WorkPool, 'stats' | 'size'>;
  /** Whether the store (and an object store of results, where there is one) answers now: the probes of /readyz, shared. */
  readiness: { check(): Promise<{ ready: boolean }>; checkResults?(): Promise<{ ready: boolean }> | null };
}

/** What a gauge reads at scrape time. */
interface ScrapeContext {
  sources: MetricsSources;
  /** The store's job counts, one read per scrape shared by the gauges that need them; null when it did not answer in time. */
  jobCounts(): Promise<JobCounts | null>;
}

type JobCounts = Awaited<ReturnType<MetricsSources['store']['jobs']['counts']>>;

/** One gauge, read at scrape time: its name, help and labels, whether this server has it, and how it is read. */
interface GaugeDefinition {
  name: string;
  help: string;
  labelNames?: string[];
  /** Absent: every server has it. */
  when?: (sources: MetricsSources) => boolean;
  collect(gauge: Gauge<string>, ctx: ScrapeContext): void | Promise<void>;
}

/** Every gauge of /metrics (docs/fleet.md lists them for operators). */
const GAUGES: readonly GaugeDefinition[] = [
  {
    name: 'cutout_jobs',
    help: 'Jobs in the store by state (fleet-wide: read from the shared store at scrape time).',
    labelNames: ['state'],
    async collect(gauge, ctx) {
      const counts = await ctx.jobCounts();
      gauge.reset();
      if (!counts) return;
      gauge.set({ state: 'queued' }, counts.queued);
      gauge.set({ state: 'processing' }, counts.processing);
    },
  },
  {
    name: 'cutout_queue_depth',
    help: 'Work waiting for an inference slot: kind="job" is the store\'s queued jobs (fleet-wide), kind="sync" the sync requests waiting on this server.',
    labelNames: ['kind'],
    async collect(gauge, ctx) {
      const counts = await ctx.jobCounts();
      gauge.reset();
      if (counts) gauge.set({ kind: 'job' }, counts.queued);
      gauge.set({ kind: 'sync' }, ctx.sources.pool.stats().sync.waiting);
    },
  },
  {
    name: 'cutout_inference_slots',
    help: 'This server\'s inference slots (--workers): state="busy" in use by a sync request or a job, state="total" all of them.',
    labelNames: ['state'],
    collect(gauge, { sources }) {
      const stats = sources.pool.stats();
      gauge.set({ state: 'busy' }, stats.sync.running + stats.jobs.running);
      gauge.set({ state: 'total' }, sources.pool.size);
    },
  },
  {
    name: 'cutout_store_ready',
    help: 'Whether this server\'s store answered a trivial query within 2 s at scrape time (1) or not (0): the store part of GET /readyz.',
    async collect(gauge, { sources }) {
      gauge.set((await sources.readiness.check()).ready ? 1 : 0);
    },
  },
  {
    name: 'cutout_store_info',
    help: 'The store this server uses (always 1; the engine is the label).',
    labelNames: ['store'],
    collect(gauge, { sources }) {
      gauge.reset();
      gauge.set({ store: sources.store.kind }, 1);
    },
  },
  {
    // Where result bytes live; with an object store, whether it answers (below): an outage of S3
    // is seen on a dashboard, not only by the load balancer.
    name: 'cutout_results_info',
    help: 'Where this server keeps result bytes (always 1; the place is the label: files, database or s3).',
    labelNames: ['results'],
    when: (sources) => Boolean(sources.store.results?.kind),
    collect(gauge, { sources }) {
      gauge.reset();
      gauge.set({ results: sources.store.results!.kind }, 1);
    },
  },
  {
    name: 'cutout_results_ready',
    help: 'Whether the object store of the results answered a HEAD of its probe object within 2 s at scrape time (1) or not (0): the results part of GET /readyz.',
    when: (sources) => sources.store.results?.kind === 's3' && Boolean(sources.readiness.checkResults),
    async collect(gauge, { sources }) {
      const state = await sources.readiness.checkResults!();
      gauge.set(state?.ready ? 1 : 0);
    },
  },
];

/**
 * The metrics counted as things happen (the gauges above are read at scrape time): one row each,
 * so that every metric of cutout's own is a row of GAUGES or of this table (METRIC_ROWS below,
 * which docs/fleet.md's tables are checked against). `zeros`: the label sets that start at 0, so
 * rate() and alerts work before the first event.
 */
export const EVENT_METRICS = Object.freeze({
  httpDuration: {
    type: 'histogram', name: 'cutout_http_request_duration_seconds',
    help: 'Time from a request\'s arrival to the end of its response, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status'], buckets: HTTP_BUCKETS,
  },
  inference: {
    type: 'histogram', name: 'cutout_inference_seconds',
    help: 'Time in the model call of one image (sync requests and jobs), by quality.',
    labelNames: ['quality'], buckets: INFERENCE_BUCKETS,
  },
  pipelineTime: {
    type: 'histogram', name: 'cutout_pipeline_seconds',
    help: 'Time to process one image end to end (decode, inference, refinement, encode), by quality.',
    labelNames: ['quality'], buckets: INFERENCE_BUCKETS,
  },
  callbacks: {
    type: 'counter', name: 'cutout_callback_deliveries_total',
    help: 'Callback delivery attempts made by this server, by outcome: delivered (2xx), retry (network error or 5xx, another attempt is scheduled), gave_up (4xx, or retries exhausted).',
    labelNames: ['outcome'], zeros: [{ outcome: 'delivered' }, { outcome: 'retry' }, { outcome: 'gave_up' }],
  },
  credits: {
    type: 'counter', name: 'cutout_credits_charged_total',
    help: 'Credits charged by this server\'s recorded removals, by channel: api (a sync request of any door) or job.',
    labelNames: ['channel'], zeros: [{ channel: 'api' }, { channel: 'job' }],
  },
  heartbeatFailures: {
    type: 'counter', name: 'cutout_store_heartbeat_failures_total',
    help: 'Heartbeats of this server that the store did not take (unreachable or too slow). Past a lease of them in a row, the fleet takes this server\'s jobs and claims over.',
    labelNames: [], zeros: [{}],
  },
} as const satisfies Record<string, EventMetricRow>);

interface EventMetricRow {
  type: 'histogram' | 'counter';
  name: string;
  help: string;
  labelNames: readonly string[];
  buckets?: readonly number[];
  zeros?: readonly Record<string, string>[];
}

/** Every metric of cutout's own, with its type and labels: what /metrics has and docs/fleet.md lists. */
export const METRIC_ROWS: readonly { name: string; type: 'gauge' | 'histogram' | 'counter'; labelNames: readonly string[] }[] = Object.freeze([
  ...Object.values(EVENT_METRICS).map((m) => ({ name: m.name, type: m.type, labelNames: m.labelNames })),
  ...GAUGES.map((g) => ({ name: g.name, type: 'gauge' as const, labelNames: g.labelNames ?? [] })),
]);

function histogramOf<L extends string>(row: EventMetricRow, registers: Registry[]): Histogram<L> {
  return new Histogram<L>({ name: row.name, help: row.help, labelNames: row.labelNames as L[], buckets: [...(row.buckets ?? [])], registers });
}

function counterOf<L extends string>(row: EventMetricRow, registers: Registry[]): Counter<L> {
  const counter = new Counter<L>({ name: row.name, help: row.help, labelNames: row.labelNames as L[], registers });
  for (const labels of row.zeros ?? []) counter.inc(labels as Partial<Record<L, string>>, 0);
  return counter;
}

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  private readonly inference: Histogram<'quality'>;
  private readonly pipelineTime: Histogram<'quality'>;
  private readonly callbacks: Counter<'outcome'>;
  private readonly credits: Counter<'channel'>;

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.httpDuration = histogramOf(EVENT_METRICS.httpDuration, registers);
    this.inference = histogramOf(EVENT_METRICS.inference, registers);
    this.pipelineTime = histogramOf(EVENT_METRICS.pipelineTime, registers);
    this.callbacks = counterOf(EVENT_METRICS.callbacks, registers);
    this.credits = counterOf(EVENT_METRICS.credits, registers);
    const heartbeatFailures = counterOf(EVENT_METRICS.heartbeatFailures, registers);
    sources.store.fleet.onHeartbeatFailure(() => heartbeatFailures.inc());
    this.registerGauges(sources, registers);
  }

  /**
   * The gauges of GAUGES that this server has. One store read per scrape: prom-client collects
   * every metric at once, and two gauges need the job counts; the read in flight is shared, and
   * forgotten once it settles. A store that does not answer within the readiness timeout leaves
   * the job gauges empty for that scrape, rather than failing it (cutout_store_ready says why).
   */
  private registerGauges(sources: MetricsSources, registers: Registry[]): void {
    let inFlight: Promise<JobCounts | null> | null = null;
    const ctx: ScrapeContext = {
      sources,
      jobCounts: () => (inFlight ??= withTimeout(sources.store.jobs.counts(), LIMITS.readyStoreTimeoutMs).catch(() => null).finally(() => { inFlight = null; })),
    };
    for (const def of GAUGES) {
      if (def.when && !def.when(sources)) continue;
      new Gauge({
        name: def.name, help: def.help, labelNames: def.labelNames ?? [], registers,
        collect() {
          return def.collect(this, ctx);
        },
      });
    }
  }

  /** Starts timing a request; the observation is made when its response ends or the connection closes. */
  observeRequest(req: IncomingMessage, res: ServerResponse): void {
    const end = this.httpDuration.startTimer();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      end({ method: req.method ?? 'UNKNOWN', route: routePatternOf(req), status: String(res.statusCode) });
    };
    res.once('finish', finish);
    res.once('close', finish);
  }

  countCallbackAttempt(outcome: CallbackOutcome): void {
    this.callbacks.inc({ outcome });
  }

  /** A recorded removal's charge (the removal service reports each one it commits). */
  countCredits(channel: string, credits: number): void {
    if (credits > 0) this.credits.inc({ channel }, credits);
  }

  /** The pipeline with every image's timings observed; the sync route and the job workers both call it. */
  observePipeline(pipeline: Pipeline): Pipeline {
    return {
      probeImage: pipeline.probeImage,
      removeBackground: async (input, request, options) => {
        const result = await pipeline.removeBackground(input, request, options);
        // Absent means `best` (api-spec's default), so the label names what ran.
        const labels = { quality: request.quality ?? 'best' };
        this.inference.observe(labels, result.timings.inference / 1000);
        this.pipelineTime.observe(labels, result.ms / 1000);
        return result;
      },
    };
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
