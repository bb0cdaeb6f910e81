/**
 * The OpenTelemetry SDK behind `Tracing` (tracing.ts), loaded by `import()` only when OTLP traces
 * are configured. The SDK (NodeSDK) reads its standard variables itself: the endpoint
 * (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), the protocol
 * (OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf, its default, or http/json), headers, the sampler
 * (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG), the resource (OTEL_RESOURCE_ATTRIBUTES,
 * OTEL_SERVICE_NAME over the default name given here), the propagators (OTEL_PROPAGATORS, W3C
 * trace context by default) and the batch processor's OTEL_BSP_* settings; nothing of them is
 * parsed here.
 *
 * Traces only: cutout's metrics are Prometheus' (/metrics) and its logs JSON lines on stdout, so the
 * SDK is given no metric reader and no log processor (its defaults would push both to the OTLP
 * endpoint). No instrumentation library is registered either: the spans are cutout's own (the
 * request, its stages, the model server's, the callbacks'), so no module is patched at load.
 */
import { NodeSDK, api, core, resources } from '@opentelemetry/sdk-node';
import type { IncomingHttpHeaders } from 'node:http';
import type { SpanAttributes, SpanOptions, TraceSpan, TracedService, Tracing } from './types.js';

const KINDS = {
  server: api.SpanKind.SERVER, client: api.SpanKind.CLIENT, internal: api.SpanKind.INTERNAL, consumer: api.SpanKind.CONSUMER,
} as const;

/** Stored traceparents are W3C's whatever OTEL_PROPAGATORS says for the wire. */
const W3C = new core.W3CTraceContextPropagator();

function definedAttributes(attributes: SpanAttributes | undefined): api.Attributes {
  const out: api.Attributes = {};
  for (const [k, v] of Object.entries(attributes ?? {})) if (v !== undefined) out[k] = v;
  return out;
}

function errorType(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.name : 'error';
}

class OtelSpan implements TraceSpan {
  private ended = false;

  constructor(readonly span: api.Span, readonly context: api.Context) {}

  get traceparent(): string | null {
    const carrier: Record<string, string> = {};
    W3C.inject(this.context, carrier, api.defaultTextMapSetter);
    return carrier.traceparent ?? null;
  }

  headers(): Record<string, string> {
    const carrier: Record<string, string> = {};
    api.propagation.inject(this.context, carrier);
    return carrier;
  }

  setAttributes(attributes: SpanAttributes): void {
    this.span.setAttributes(definedAttributes(attributes));
  }

  rename(name: string): void {
    this.span.updateName(name);
  }

  fail(error: unknown): void {
    const type = errorType(error);
    this.span.setAttribute('error.type', type);
    this.span.setStatus({ code: api.SpanStatusCode.ERROR, message: type });
  }

  end(endMs?: number): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end(endMs);
  }
}

class OtelTracing implements Tracing {
  readonly enabled = true;

  constructor(private readonly sdk: NodeSDK, private readonly tracer: api.Tracer) {}

  private parentContext(parent: SpanOptions['parent']): api.Context {
    if (parent === undefined) return api.context.active();
    if (parent === null) return api.ROOT_CONTEXT;
    if (typeof parent === 'string') return W3C.extract(api.ROOT_CONTEXT, { traceparent: parent }, api.defaultTextMapGetter);
    return parent instanceof OtelSpan ? parent.context : api.ROOT_CONTEXT;
  }

  private open(name: string, parentContext: api.Context, options: SpanOptions): TraceSpan {
    const span = this.tracer.startSpan(name, {
      kind: KINDS[options.kind ?? 'internal'], attributes: definedAttributes(options.attributes), startTime: options.startMs,
    }, parentContext);
    return new OtelSpan(span, api.trace.setSpan(parentContext, span));
  }

  start(name: string, options: SpanOptions = {}): TraceSpan {
    return this.open(name, this.parentContext(options.parent), options);
  }

  startFromHeaders(name: string, headers: IncomingHttpHeaders, options: Omit<SpanOptions, 'parent'> = {}): TraceSpan {
    return this.open(name, api.propagation.extract(api.ROOT_CONTEXT, headers, api.defaultTextMapGetter), options);
  }

  within<T>(span: TraceSpan, work: () => T): T {
    return span instanceof OtelSpan ? api.context.with(span.context, work) : work();
  }

  active(): TraceSpan | null {
    const span = api.trace.getActiveSpan();
    return span ? new OtelSpan(span, api.context.active()) : null;
  }

  private stopping: Promise<void> | null = null;

  /** Idempotent: a server's stop and a failed start may both call it. */
  shutdown(): Promise<void> {
    return (this.stopping ??= this.sdk.shutdown());
  }
}

/** Starts the SDK (registered as the process's global provider, as the SDK does) and its tracer. */
export function startOtelTracing(service: TracedService): Tracing {
  const sdk = new NodeSDK({
    // The default name and the version; the environment detector's OTEL_SERVICE_NAME and
    // OTEL_RESOURCE_ATTRIBUTES are merged over them by the SDK.
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ 'service.name': service.name, 'service.version': service.version })),
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
  });
  sdk.start();
  return new OtelTracing(sdk, api.trace.getTracer('cutout', service.version));
}
