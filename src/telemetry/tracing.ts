/**
 * Traces (OpenTelemetry), as the rest of cutout sees them: one small interface, `Tracing`, made once
 * when a server starts (`startTracing`) and reached through the server's context, never through
 * module state. With tracing off it is `NO_TRACING`, whose spans do nothing, so that no call site
 * asks whether tracing is on.
 *
 * This file imports nothing of OpenTelemetry: the SDK is loaded by `import('./otel.js')` only when
 * OTLP export is configured by the SDK's standard variables (OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, and OTEL_SDK_DISABLED not true). Off, no @opentelemetry
 * module is loaded at all (test/traces.test.ts checks the loaded modules of a server).
 *
 * What a span may carry: routes, doors, statuses, key ids, sizes, timings. Never a secret (a key,
 * a token, a signature), an image byte, a result or job id (each is a capability URL), or a URL a
 * customer gave (their query strings carry their own tokens): the call sites pass only those.
 */
import type { SpanOptions, TraceSpan, TracedService, Tracing } from './types.js';

export type { SpanAttributes, SpanOptions, TraceSpan, TracedService, Tracing } from './types.js';

const NO_SPAN: TraceSpan = Object.freeze({
  traceparent: null,
  headers: () => ({}),
  setAttributes: () => undefined,
  rename: () => undefined,
  fail: () => undefined,
  end: () => undefined,
});

/** Tracing off: spans that do nothing. */
export const NO_TRACING: Tracing = Object.freeze({
  enabled: false,
  start: () => NO_SPAN,
  startFromHeaders: () => NO_SPAN,
  within: <T>(_span: TraceSpan, work: () => T) => work(),
  active: () => null,
  shutdown: async () => undefined,
});

/** Whether the SDK's own variables ask for OTLP traces (the SDK reads everything else itself). */
export function tracingWanted(env: NodeJS.ProcessEnv): boolean {
  const endpoint = Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
  return endpoint && env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true';
}


/**
 * The tracing of one process: NO_TRACING unless the environment asks for OTLP traces; then the
 * SDK, loaded now. `env` is the SDK's to read; it is passed only to decide whether to load it.
 */
export async function startTracing(service: TracedService, env: NodeJS.ProcessEnv = process.env): Promise<Tracing> {
  if (!tracingWanted(env)) return NO_TRACING;
  const { startOtelTracing } = await import('./otel.js');
  return startOtelTracing(service);
}

/**
 * Spans of the pipeline's stages, made from the durations it measured (StageTimings) once it has
 * returned, laid end to end in the pipeline's order from its start: the pipeline itself is not
 * traced (it knows nothing of HTTP or traces). A decode that overlapped the model run shows
 * before it. Preprocessing and the matte's refinement are the gaps between them.
 */
export function stageSpans(
  tracing: Tracing, parent: TraceSpan, startMs: number,
  timings: { decode: number; preprocess: number; inference: number; postprocess: number; encode: number },
  options: { inference: boolean },
): void {
  const stages: [keyof typeof timings, string | null][] = [
    ['decode', 'cutout.decode'], ['preprocess', null], ['inference', options.inference ? 'cutout.inference' : null], ['postprocess', null], ['encode', 'cutout.encode'],
  ];
  let at = startMs;
  for (const [stage, name] of stages) {
    const ms = timings[stage];
    if (name) {
      const attributes = stage === 'inference' ? { 'cutout.inference.where': 'local' } : undefined;
      tracing.start(name, { parent, startMs: at, attributes }).end(at + ms);
    }
    at += ms;
  }
}

/** Now, in ms since the epoch with sub-millisecond precision (spans' explicit times). */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Runs `work` in a span of its own (active inside it), failed when `work` throws, ended when it settles. */
export async function inSpan<T>(tracing: Tracing, name: string, options: SpanOptions, work: (span: TraceSpan) => Promise<T>): Promise<T> {
  const span = tracing.start(name, options);
  try {
    return await tracing.within(span, () => work(span));
  } catch (err) {
    span.fail(err);
    throw err;
  } finally {
    span.end();
  }
}
