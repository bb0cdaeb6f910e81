/**
 * The HTTP transport helpers every API shares: a capped Buffer reader for JSON, formidable for
 * multipart (files kept in memory, the 25 MB cap enforced while streaming), content negotiation
 * and the send helpers. What a parameter means is each API's own (v1: v1-params.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import formidable, { errors as formidableErrors } from 'formidable';
import { Writable, type Duplex } from 'node:stream';
import { CutoutError, toCutoutError } from '../errors.js';
import { formatMB, formatSize, LIMITS } from '../limits.js';

/** Room for the multipart framing and the small fields around a 25 MB upload or its base64. */
const MULTIPART_OVERHEAD = 256 * 1024;

/**
 * image_too_large naming what is over the input limit (or `limit`, an API's own body limit);
 * `param`: the request parameter it is.
 */
export function tooLarge(what: string, param?: string, limit?: number): CutoutError {
  const named = limit === undefined ? formatMB(LIMITS.maxInputBytes) : `${formatSize(limit)} body`;
  return new CutoutError('image_too_large', `${what} is over the ${named} limit${limit === undefined ? '' : ' of this API'}.`, { param });
}

/**
 * The body limit of the API a request is under (ApiPlugin.limits.bodyBytes), set by mountApi
 * for the request's life: per request, like the docs base below, and read by the body readers,
 * which apply it on top of the server's own limits (it can only lower them).
 */
const bodyLimits = new WeakMap<IncomingMessage, number>();

/** Holds every body read of `req` to at most `bytes` (an API's own limit). */
export function limitBody(req: IncomingMessage, bytes: number): void {
  bodyLimits.set(req, bytes);
}

/** A reader's cap for `req`: its own `cap`, or the request's API limit when that is lower. */
function capOf(req: IncomingMessage, cap: number): { bytes: number; apiLimit: number | undefined } {
  const own = bodyLimits.get(req);
  return own !== undefined && own < cap ? { bytes: own, apiLimit: own } : { bytes: cap, apiLimit: undefined };
}

function declaredLength(req: IncomingMessage): number | null {
  const v = req.headers['content-length'];
  return v === undefined ? null : Number(v);
}

/** Reads the whole body into one Buffer, refusing by Content-Length first and by counted bytes as they arrive. */
export function readCappedBody(req: IncomingMessage, readerCap: number): Promise<Buffer> {
  const { bytes: maxBytes, apiLimit } = capOf(req, readerCap);
  const declared = declaredLength(req);
  if (declared !== null && declared > maxBytes) return Promise.reject(tooLarge('The request body', undefined, apiLimit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) {
        req.off('data', onData);
        req.resume(); // keep draining so the socket can carry the error response
        reject(tooLarge('The request body', undefined, apiLimit));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks, received)));
    req.once('error', reject);
    req.once('aborted', () => reject(new CutoutError('invalid_request', 'The request body was cut short.')));
  });
}

export function mediaType(req: IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
}

/** Reads a JSON object body (application/json), capped. */
export async function readJsonObject(req: IncomingMessage, maxBytes = LIMITS.maxJsonBytes): Promise<Record<string, unknown>> {
  const body = await readCappedBody(req, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new CutoutError('invalid_request', 'The request body is not valid JSON.');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CutoutError('invalid_request', 'The JSON body must be an object.');
  return value as Record<string, unknown>;
}

/**
 * Maps formidable's numeric error codes to ours: size errors are image_too_large (naming the
 * API's body limit when that was the cap), the rest invalid_request.
 */
function formidableError(err: unknown, apiLimit: number | undefined): CutoutError {
  if (err instanceof CutoutError) return err;
  const code = (err as { code?: unknown }).code;
  const sizeCodes = [formidableErrors.biggerThanTotalMaxFileSize, formidableErrors.biggerThanMaxFileSize, formidableErrors.maxFieldsSizeExceeded];
  if (typeof code === 'number' && sizeCodes.includes(code)) return tooLarge('The upload', undefined, apiLimit);
  if (code === formidableErrors.maxFilesExceeded) return new CutoutError('invalid_request', 'Give exactly one image source: only one file may be uploaded.');
  if (code === formidableErrors.noEmptyFiles || code === formidableErrors.smallerThanMinFileSize) return new CutoutError('invalid_request', 'The uploaded image_file is empty.');
  return new CutoutError('invalid_request', `The multipart body could not be read: ${(err as Error).message ?? 'malformed'}.`);
}

/** The parameters of a part's Content-Disposition (`form-data; name="a"; filename*=utf-8''b`), names lower-cased. */
function dispositionParams(header: string): Map<string, string> {
  const params = new Map<string, string>();
  // A parameter is `name=token` or `name="quoted string"` (backslash escapes kept as browsers and
  // Python write them: a quote inside a file name comes as %22 or \").
  const re = /;\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
  for (const m of header.matchAll(re)) {
    const name = m[1].toLowerCase();
    if (!params.has(name)) params.set(name, m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3].trim());
  }
  return params;
}

/** An RFC 5987 value (`utf-8''caf%C3%A9.jpg`, .NET's `filename*`) decoded; null when it is not one. */
function extValue(value: string): string | null {
  const m = /^([\w!#$%&+^`{}~-]*)'[^']*'(.*)$/.exec(value);
  if (!m) return null;
  try {
    if (/^utf-8$/i.test(m[1]) || m[1] === '') return decodeURIComponent(m[2]);
    // ISO-8859-1, the other charset RFC 5987 names: each %XX is one character.
    return m[2].replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  } catch {
    return m[2];
  }
}

/**
 * The file name a multipart part carries, or null when it names none (a field). `filename*`
 * (RFC 5987, what .NET adds) wins over `filename`, as RFC 6266 says; an empty `filename=""` is a
 * name all the same (a browser's file input). Only whether there is one matters to the intake.
 */
export function partFileName(disposition: string | undefined): string | null {
  if (!disposition) return null;
  const params = dispositionParams(disposition);
  const ext = params.get('filename*');
  if (ext !== undefined) return extValue(ext) ?? ext;
  return params.get('filename') ?? null;
}

/** A multipart part as formidable hands it to `onPart` (node_modules/formidable/src/plugins/multipart.js). */
interface FormidablePart {
  headers: Record<string, string>;
  name: string | null;
  originalFilename: string | null;
  mimetype: string | null;
}

/**
 * Reads multipart/form-data: fields as strings, files as Buffers, both by name.
 *
 * One rule for every door (docs/internals.md, "One intake"): a part with a file name is a file,
 * whatever its Content-Type says or whether it has one (Python requests and OkHttp send none,
 * Go, PHP's CURLFile and Ruby's Net::HTTP `application/octet-stream`, others a type guessed from
 * the name), and a part without one is a field, even typed (aiohttp types its text fields
 * `text/plain; charset=utf-8`). formidable alone decides by the Content-Type (none: a field), so
 * its `onPart` hook sets what its `_handlePart` reads. An image's type comes from its bytes
 * (the pipeline's decode), never from the part.
 */
export async function readMultipart(req: IncomingMessage, options: { maxFiles?: number } = {}): Promise<{ fields: Record<string, string[]>; files: Record<string, Buffer[]> }> {
  const body = capOf(req, LIMITS.maxJsonBytes + MULTIPART_OVERHEAD);
  const declared = declaredLength(req);
  if (declared !== null && declared > body.bytes) throw tooLarge('The request body', undefined, body.apiLimit);
  const buffers = new Map<object, Buffer[]>();
  // A body sent without its length (chunked) is held to an API's lower limit by these caps,
  // which formidable keeps while the body streams in.
  const form = formidable({
    maxFiles: options.maxFiles ?? 1,
    maxFileSize: capOf(req, LIMITS.maxInputBytes).bytes,
    // An image and, for remove.bg's dialect, a background picture: each up to the input limit.
    maxTotalFileSize: capOf(req, LIMITS.maxInputBytes * (options.maxFiles ?? 1)).bytes,
    // image_file_b64 may come as a form field: 4/3 of the image.
    maxFieldsSize: capOf(req, LIMITS.maxJsonBytes).bytes,
    maxFields: 32,
    allowEmptyFiles: false,
    // Keep uploads in memory: nothing touches the disk, nothing to clean up on failure.
    fileWriteStreamHandler: (file?: unknown) => {
      const chunks: Buffer[] = [];
      if (file) buffers.set(file, chunks);
      return new Writable({ write(chunk: Buffer, _enc, done) { chunks.push(chunk); done(); } });
    },
  });
  // formidable's documented hook: decide file or field here, then let it handle the part.
  const hooked = form as unknown as { onPart: (part: FormidablePart) => Promise<void>; _handlePart: (part: FormidablePart) => Promise<void> };
  hooked.onPart = (part) => {
    const fileName = partFileName(part.headers['content-disposition']);
    part.originalFilename = fileName;
    // _handlePart takes a part without a mimetype for a field and one with any for a file.
    part.mimetype = fileName === null ? null : 'application/octet-stream';
    return hooked._handlePart(part);
  };
  try {
    const [fields, files] = await form.parse(req);
    const out: Record<string, Buffer[]> = {};
    for (const [name, list] of Object.entries(files)) out[name] = (list ?? []).map((f) => Buffer.concat(buffers.get(f) ?? []));
    const strings: Record<string, string[]> = {};
    for (const [name, list] of Object.entries(fields)) strings[name] = list ?? [];
    return { fields: strings, files: out };
  } catch (err) {
    req.resume();
    throw formidableError(err, body.apiLimit);
  }
}

/** The media ranges of an Accept header, lower-cased, best first (highest q, then first listed); q=0 ones included. */
export function acceptedRanges(accept: string | undefined): { type: string; q: number; index: number }[] {
  if (!accept) return [];
  const ranges = accept.split(',').map((part, index) => {
    const [type, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return { type: type.trim(), q: q ? Number(q.slice(2)) : 1, index };
  });
  return ranges.sort((a, b) => b.q - a.q || a.index - b.index);
}

/** The media range the client's Accept ranks first (highest q, then first listed); null without one. */
export function firstAccepted(req: IncomingMessage): string | null {
  const [first] = acceptedRanges(req.headers.accept);
  return first && first.q > 0 ? first.type : null;
}

/** True when the client asked for JSON first; otherwise the route answers with image bytes. */
export function wantsJson(req: IncomingMessage): boolean {
  return firstAccepted(req) === 'application/json';
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { ...headers, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(data.length) });
  res.end(data);
}

export function sendBytes(res: ServerResponse, status: number, data: Buffer, contentType: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, 'Content-Type': contentType, 'Content-Length': String(data.length), 'X-Content-Type-Options': 'nosniff' });
  res.end(data);
}

/** The `{base_url}` of the server that answers each response: its errors' `docs` link there. */
const docsBases = new WeakMap<ServerResponse, string>();

/** Called once per request by the server: the errors of `res` link to `baseUrl`'s error reference. */
export function linkErrorDocs(res: ServerResponse, baseUrl: string): void {
  docsBases.set(res, baseUrl);
}

/** The part 7 body of `err`, its `docs` an absolute link to the reference of the server answering `res`. */
export function errorBody(res: ServerResponse, err: CutoutError): ReturnType<CutoutError['body']> {
  return err.body(docsBases.get(res));
}

/** Writes any error as the part 7 body (unknown exceptions as processing_failed, without internals). */
export function sendError(res: ServerResponse, err: unknown, extraBody: Record<string, unknown> = {}): void {
  const e = toCutoutError(err);
  sendJson(res, e.status, { ...errorBody(res, e), ...extraBody }, e.headers);
}

/** Why Node's HTTP parser refused a request, for the one-line message of `answerClientError`. */
function clientErrorReason(code: string | undefined): string {
  if (code === 'HPE_HEADER_OVERFLOW') return 'The request headers are too large.';
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'The request was not received in time.';
  if (code === 'HPE_INVALID_CONTENT_LENGTH' || code === 'HPE_UNEXPECTED_CONTENT_LENGTH') return 'The Content-Length header is invalid.';
  return 'The request is not valid HTTP.';
}

/**
 * A request Node's HTTP parser refused (bad syntax, headers over 16 KB, a request timeout) gets
 * the part 7 JSON body too, where Node alone sends an empty 400, 431 or 408. Its status is 400:
 * part 7 gives `invalid_request` 400 or 422, and no other status for a malformed request.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex, baseUrl = ''): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(new CutoutError('invalid_request', clientErrorReason(err.code)).body(baseUrl));
  socket.end(
    'HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\n'
      + `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

