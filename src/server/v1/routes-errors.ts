/**
 * GET /api/v1/errors: the error reference that every error's `docs` links to
 * (`{base_url}/api/v1/errors#<code>`), served by the server itself, without authentication. JSON
 * by default; a browser (Accept preferring text/html) gets the same content as an HTML page with
 * one anchor per code. The figures are this server's (its sync timeout, rate limit, retention).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ERROR_TABLE, errorDocsUrl, type ErrorCode } from '../../errors.js';
import { formatMB, LIMITS } from '../../limits.js';
import { firstAccepted, sendJson } from '../http.js';
import type { ServerContext } from '../context.js';

export interface ErrorReferenceEntry {
  code: ErrorCode;
  /** The usual HTTP status of the code. */
  status: number;
  /** Every status the code comes with (invalid_request: 400 or 422; processing_failed: 500 or 504). */
  statuses: number[];
  meaning: string;
  fix: string;
  /** This entry's own link, the `docs` of an error with this code. */
  docs: string;
}

/** The figures the texts quote: this server's settings. */
interface Figures {
  syncTimeoutMs: number;
  rateLimit: number;
  resultTtlSeconds: number;
}

const MP = (pixels: number) => `${pixels / 1_000_000} MP`;

function guide(f: Figures): Record<ErrorCode, { statuses: number[]; meaning: string; fix: string }> {
  return {
    invalid_api_key: {
      statuses: [401],
      meaning: 'The Authorization header is missing or is not `Bearer <API_KEY>`, or the key is malformed, unknown, revoked or past its `expires_at`.',
      fix: 'Send `Authorization: Bearer <API_KEY>` on every call but result download, health, the OpenAPI document and this reference. On a self-hosted server, `cutout keys create` makes a key; a lost key cannot be shown again: revoke it (`cutout keys revoke ID`) and create another.',
    },
    insufficient_credits: {
      statuses: [402],
      meaning: `The balance is 0 and the request asked for a full-resolution result (\`size=full\`, or \`size=auto\` on an image of at most ${MP(LIMITS.autoFullMaxPixels)}), which costs 1 credit.`,
      fix: 'Ask `size=preview` (free, the default when `size` is not given), or add credits: on a self-hosted server `cutout credits add ACCOUNT_OR_KEY_ID AMOUNT`.',
    },
    rate_limited: {
      statuses: [429],
      meaning: `More than ${f.rateLimit} requests in a minute (sliding window) with this key.`,
      fix: 'Wait the seconds of `Retry-After`, and pace requests by `X-RateLimit-Remaining` and `X-RateLimit-Reset`. The operator sets the limit with `cutout serve --rate-limit N`.',
    },
    invalid_request: {
      statuses: [400, 422],
      meaning: `A parameter is missing or invalid, more than one image source (or none) was given, an \`image_url\` or \`X-Callback-Url\` is not a public http(s) URL, or the image is over ${MP(LIMITS.maxSyncFullPixels)} at \`size=full\` on the sync \`POST /api/v1/remove\`. Validation answers (422) also carry \`detail\` with each problem's \`loc\`.`,
      fix: 'Read `message`: it names the parameter. Give exactly one of `image_file`, `image_url`, `image_file_b64`. Send larger images at full size through `POST /api/v1/jobs`. For loopback or private URLs in development and tests, start the server with `--allow-private-network`.',
    },
    unsupported_format: {
      statuses: [400],
      meaning: 'The bytes are not a decodable JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC image (the format is found from the bytes, never from a file name or MIME type).',
      fix: 'Convert the image to one of these formats; check that the upload is not empty or truncated, and that an `image_url` answers an image, not an HTML page.',
    },
    image_too_large: {
      statuses: [400],
      meaning: `The upload is over ${formatMB(LIMITS.maxInputBytes)}, or the image is over ${MP(LIMITS.maxInputPixels)}.`,
      fix: 'Downscale or recompress the image before sending it.',
    },
    no_subject_detected: {
      statuses: [422],
      meaning: 'The model found no foreground subject: an empty or uniform image, or a subject it does not single out. Nothing was charged.',
      fix: 'Check that the image has a distinct subject; at `quality=fast` or `balanced`, try `best` (a larger model input finds subjects more often).',
    },
    processing_failed: {
      statuses: [500, 504],
      meaning: `The model failed (500), or the sync request took longer than its ${f.syncTimeoutMs / 1000} s limit (504). Nothing was charged.`,
      fix: 'Retry; send large images, or work that may take long, through `POST /api/v1/jobs`. An operator finds the cause in the server\'s log line for the request (`X-Request-Id`).',
    },
    gpu_unavailable: {
      statuses: [503],
      meaning: 'The job queue is full, the server is stopping, or the inference server the model runs on (`cutout serve --upstream`) is unreachable, overloaded or timing out. Nothing was charged.',
      fix: 'Retry after the seconds of `Retry-After`. Operators: raise `--queue-limit` or `--workers`, or check the upstream inference server.',
    },
    not_found: {
      statuses: [404],
      meaning: `No such route, job or result, or the result has expired (results are kept ${f.resultTtlSeconds / 3600} h). Not one of the codes of the v1 specification: its answer to an unknown or expired id, in the same shape.`,
      fix: 'Check the path (the API lives under `/api/v1`, see `/api/v1/openapi.json`) and the id; download results before they expire.',
    },
  };
}

/** The reference of a server at `baseUrl` with these settings, one entry per code. */
export function errorReference(baseUrl: string, figures: Figures): ErrorReferenceEntry[] {
  const texts = guide(figures);
  return (Object.keys(ERROR_TABLE) as ErrorCode[]).map((code) => ({
    code,
    status: ERROR_TABLE[code].status,
    statuses: texts[code].statuses,
    meaning: texts[code].meaning,
    fix: texts[code].fix,
    docs: errorDocsUrl(code, baseUrl),
  }));
}

/** True when the client ranks text/html first (a browser following an error's `docs` link). */
function wantsHtml(req: IncomingMessage): boolean {
  return firstAccepted(req) === 'text/html';
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** `code` spans in the texts become <code> elements (after escaping). */
const inline = (text: string) => escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');

export function errorReferenceHtml(entries: ErrorReferenceEntry[]): string {
  const rows = entries.map((e) => [
    `<section id="${e.code}">`,
    `<h2><a href="#${e.code}"><code>${e.code}</code></a> (HTTP ${e.statuses.join(' or ')})</h2>`,
    `<p><strong>Meaning:</strong> ${inline(e.meaning)}</p>`,
    `<p><strong>Fix:</strong> ${inline(e.fix)}</p>`,
    '</section>',
  ].join('\n'));
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>cutout API errors</title></head>',
    '<body>',
    '<h1>cutout API errors</h1>',
    '<p>Every error answer is JSON: <code>{"error": {"code", "message", "docs"}}</code>, and <code>docs</code> links to the entry of its code below. ',
    'The same reference as JSON: <code>GET /api/v1/errors</code> with <code>Accept: application/json</code>. The whole API: <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</p>',
    ...rows,
    '</body>',
    '</html>',
    '',
  ].join('\n');
}

/** No script, style or other origin: a plain document. */
const ERRORS_CSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function handleErrors(ctx: Pick<ServerContext, 'baseUrl' | 'config'>, req: IncomingMessage, res: ServerResponse): void {
  const entries = errorReference(ctx.baseUrl, ctx.config);
  if (wantsHtml(req)) {
    const body = Buffer.from(errorReferenceHtml(entries));
    res.writeHead(200, {
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Length': String(body.length),
      'Content-Security-Policy': ERRORS_CSP,
      'X-Content-Type-Options': 'nosniff',
      'Vary': 'Accept',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    return;
  }
  sendJson(res, 200, { errors: entries }, { 'Vary': 'Accept' });
}
