/**
 * The shapes of traces (tracing.ts), apart from both their implementations, so that the SDK's
 * (otel.ts, loaded on demand) and the no-op one import them without importing each other.
 */
import type { IncomingHttpHeaders } from 'node:http';

export type SpanAttributes = Record<string, string | number | boolean | undefined>;

export interface TraceSpan {
  /** The W3C traceparent of this span, to store with a job or a callback; null when not traced. */
  readonly traceparent: string | null;
  /** The propagation headers (traceparent, tracestate) for a request made within this span. */
  headers(): Record<string, string>;
  setAttributes(attributes: SpanAttributes): void;
  /** Names the span once what names it is known (a request's route pattern, after routing). */
  rename(name: string): void;
  /** Marks the span failed with the error's code (a CutoutError's) or class; never its message, which may name an input. */
  fail(error: unknown): void;
  /** Ends the span (at `endMs`, ms since the epoch, when given); later calls do nothing. */
  end(endMs?: number): void;
}

export interface SpanOptions {
  /** A span, a stored traceparent, or null for a new trace; absent: the active span. */
  parent?: TraceSpan | string | null;
  attributes?: SpanAttributes;
  /** The start, in ms since the epoch (a stage measured before its span was made); absent: now. */
  startMs?: number;
  kind?: 'server' | 'client' | 'internal' | 'consumer';
}

export interface Tracing {
  readonly enabled: boolean;
  start(name: string, options?: SpanOptions): TraceSpan;
  /** A span whose parent comes from an incoming request's headers (`traceparent`), or a new trace. */
  startFromHeaders(name: string, headers: IncomingHttpHeaders, options?: Omit<SpanOptions, 'parent'>): TraceSpan;
  /** Runs `work` with `span` active: spans started inside without a parent are its children. */
  within<T>(span: TraceSpan, work: () => T): T;
  /** The active span (a request's, a job's), or null. */
  active(): TraceSpan | null;
  /** Sends what is still buffered and stops; a server calls it as it stops. */
  shutdown(): Promise<void>;
}

/** Who is tracing: the default `service.name` (OTEL_SERVICE_NAME overrides it) and the version. */
export interface TracedService {
  name: string;
  version: string;
}
