/**
 * The span of one HTTP request to `cutout serve` (src/telemetry/tracing.ts): opened as the request
 * arrives, its parent the caller's `traceparent` when it sent one, active while the handlers run
 * (so that the removal's spans are its children), ended when the response ends or the connection
 * closes. Its attributes: method, route pattern (never the raw URL: a result URL is a capability),
 * status, the door (the API the path belongs to) and the caller's key id once authenticated. Never
 * a header, a query string or a body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TraceSpan, Tracing } from '../telemetry/tracing.js';
import { routePatternOf } from './metrics.js';

const KEY_ID = Symbol('cutout.callerKeyId');
type Tagged = IncomingMessage & { [KEY_ID]?: string };

/** Remembers the authenticated caller's key id on the request (its span and nothing else reads it). */
export function setCallerKeyId(req: IncomingMessage, keyId: string | null): void {
  if (keyId) (req as Tagged)[KEY_ID] = keyId;
}

/**
 * The probes a load balancer, Kubernetes and Prometheus call every few seconds: a trace each would
 * bury the requests' traces (and cost the collector), so they have none.
 */
const UNTRACED_PATHS: ReadonlySet<string> = new Set(['/readyz', '/metrics', '/api/v1/health']);

/** Whether a request gets a span (every one but the probes). */
export function traced(req: IncomingMessage): boolean {
  return !UNTRACED_PATHS.has((req.url ?? '/').split('?')[0]);
}

/** Opens the request's span; `door` names the API a path belongs to (`none` outside every API). */
export function traceRequest(tracing: Tracing, req: IncomingMessage, res: ServerResponse, door: (path: string) => string): TraceSpan {
  const method = req.method ?? 'UNKNOWN';
  const path = (req.url ?? '/').split('?')[0];
  const span = tracing.startFromHeaders(`${method}`, req.headers, { kind: 'server', attributes: { 'http.request.method': method, 'cutout.door': door(path) } });
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    const route = routePatternOf(req);
    span.rename(`${method} ${route}`);
    span.setAttributes({
      'http.route': route, 'http.response.status_code': res.statusCode,
      'cutout.key_id': (req as Tagged)[KEY_ID], 'cutout.request_id': (req as IncomingMessage & { id?: string }).id,
    });
    if (!res.writableFinished) span.setAttributes({ 'cutout.client_closed': true });
    if (res.statusCode >= 500) span.fail({ code: String(res.statusCode) });
    span.end();
  };
  res.once('finish', finish);
  res.once('close', finish);
  return span;
}
