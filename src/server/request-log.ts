/**
 * Request ids and the one-JSON-line-per-request log (pino with pino-http), on stdout.
 *
 * The id: the caller's `X-Request-Id` when it is sane (1-128 characters of `A-Z a-z 0-9 . _ : -`,
 * what nginx's $request_id, UUIDs, ULIDs and most tracing ids fit), else a new UUID. Anything else
 * (too long, spaces, quotes, control characters, two headers joined with a comma) is replaced, so a
 * caller cannot forge log structure or blow up the line. The id is set on the response before any
 * handler runs, so every answer carries it: successes, errors, 404s.
 *
 * The line: method, route pattern (never the raw URL: a result URL is a capability, and a query
 * string could carry anything), status, duration, request id, and the server's identity. Never a
 * header (so never the API key) and never a body.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pino, stdTimeFunctions, type Logger } from 'pino';
import { pinoHttp, type HttpLogger } from 'pino-http';
import type { LogLevel } from '../config.js';
import type { ServerIdentity } from '../identity.js';
import { LIMITS } from '../limits.js';
import { routePatternOf, UNMATCHED_ROUTE } from './metrics.js';

export const REQUEST_ID_HEADER = 'X-Request-Id';

const SANE_REQUEST_ID = new RegExp(`^[A-Za-z0-9._:-]{1,${LIMITS.maxRequestIdLength}}$`);

/** The caller's id when it is sane, else a new one. */
export function chooseRequestId(given: string | string[] | undefined): string {
  return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : randomUUID();
}

type WithId = IncomingMessage & { id?: string };

/** Gives the request its id and echoes it in the response header. Runs first, for every request. */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const id = chooseRequestId(req.headers['x-request-id']);
  (req as WithId).id = id;
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** The JSON logger of a server: ISO times, level names, the server's identity on every line. */
export function createLogger(level: LogLevel, identity: ServerIdentity, destination: NodeJS.WritableStream | number = 1): Logger {
  return pino(
    {
      level,
      base: { server: identity.id },
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    typeof destination === 'number' ? pino.destination({ dest: destination, sync: true }) : destination,
  );
}

/** What a request's line says, besides level, time, server, requestId and msg. */
function requestFields(req: IncomingMessage, res: ServerResponse, durationMs: number) {
  return {
    method: req.method,
    route: routePatternOf(req),
    status: res.statusCode,
    durationMs,
    // The client went away before the whole response was written.
    ...(res.writableFinished ? {} : { aborted: true }),
  };
}

/** pino-http, set up to write exactly one flat line per request when its response ends. */
export function createRequestLogger(logger: Logger): HttpLogger {
  return pinoHttp({
    logger,
    // assignRequestId ran before; this only covers a caller that skipped it.
    genReqId: (req, res) => (req as WithId).id ?? assignRequestId(req, res),
    customAttributeKeys: { reqId: 'requestId', responseTime: 'durationMs' },
    // No req/res objects on the line (they would carry headers, hence the API key): only the
    // request id is bound, and the fields come from requestFields.
    quietReqLogger: true,
    quietResLogger: true,
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : 'info'),
    customSuccessMessage: () => 'request completed',
    customErrorMessage: () => 'request failed',
    customSuccessObject: (req, res, val: { durationMs: number }) => requestFields(req, res, val.durationMs),
    // The cause of a 5xx is already on stderr (the app's onError): the line stays the same shape.
    customErrorObject: (req, res, _err, val: { durationMs: number }) => requestFields(req, res, val.durationMs),
  });
}

/** A UUID anywhere in a path (job ids, which are also result capabilities). */
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/**
 * The request's path as a log line may show it: the route pattern it matched
 * (`/api/v1/results/:job_id`), never the raw path, whose id is a result's capability (anyone with
 * the URL downloads the result). A path that matched no route loses its query, any UUID, and
 * whatever follows `/results/`.
 */
export function redactedPath(req: IncomingMessage): string {
  const pattern = routePatternOf(req);
  if (pattern !== UNMATCHED_ROUTE) return pattern;
  const path = (req.url ?? '').split('?')[0];
  return path.replace(/(\/results\/).*$/, '$1:id').replace(UUID, ':id');
}
