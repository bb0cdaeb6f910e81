/**
 * The one error type of cutout. Its `code` is an error code of api-spec part 7; the HTTP status
 * and the documentation link come from one table, so the CLI and the server never disagree.
 */
export type ErrorCode =
  | 'invalid_api_key'
  | 'insufficient_credits'
  | 'rate_limited'
  | 'invalid_request'
  | 'unsupported_format'
  | 'image_too_large'
  | 'no_subject_detected'
  | 'processing_failed'
  | 'gpu_unavailable'
  | 'not_found';

/**
 * The error reference every server serves itself (`GET /api/v1/errors`, JSON, or an HTML page for
 * a browser); an error's `docs` is this path under the server's `{base_url}`, with the code as
 * the fragment.
 */
export const ERRORS_PATH = '/api/v1/errors';

/** `{base_url}/api/v1/errors#<code>`; without a base URL (outside a server) the path alone. */
export function errorDocsUrl(code: ErrorCode, baseUrl = ''): string {
  return `${baseUrl.replace(/\/+$/, '')}${ERRORS_PATH}#${code}`;
}

/**
 * How a caller with no credits gets some, said in every 402 (issue 51): on a self-hosted server
 * credits are added by its operator, with the CLI.
 */
export const ADD_CREDITS = "To add credits, the server's operator runs `cutout credits add ACCOUNT_OR_KEY_ID AMOUNT` (the key's id is in `cutout keys list`).";

export const ERROR_TABLE: Readonly<Record<ErrorCode, { status: number; message: string }>> = Object.freeze({
  invalid_api_key: { status: 401, message: 'Missing, malformed, unknown or revoked API key.' },
  insufficient_credits: { status: 402, message: `Credit balance is 0; full-size results cost 1 credit. Previews are free. ${ADD_CREDITS}` },
  rate_limited: { status: 429, message: 'Too many requests for this key; see Retry-After.' },
  invalid_request: { status: 400, message: 'The request is invalid.' },
  unsupported_format: { status: 400, message: 'The bytes are not a decodable JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC image.' },
  image_too_large: { status: 400, message: 'The image is over 25 MB or over 50 megapixels.' },
  no_subject_detected: { status: 422, message: 'No foreground subject was found in the image.' },
  processing_failed: { status: 500, message: 'Processing failed; nothing was charged.' },
  gpu_unavailable: { status: 503, message: 'The queue is full; see Retry-After.' },
  // Not one of the nine codes of part 7: the spec leaves unknown/expired ids "not shown".
  // We answer 404 with this code, in the same error shape (documented in docs/http-api.md).
  not_found: { status: 404, message: 'No such resource, or it has expired.' },
});

/**
 * The reasons an error can give beside its code: which case of the code it is, for a caller that
 * acts on it (a dialect's own code, a retry policy, a hint) without reading the message. Set where
 * the error is thrown. An option's reason (OptionError) is remove.bg's code for it
 * (`roi_exceeds_bounds`, `failed_image_download`, ...), listed with that dialect.
 */
export const ERROR_REASONS = Object.freeze({
  resolution_too_high: { code: 'image_too_large', meaning: 'over the pixel limit (50 MP), not the byte limit' },
  not_an_image: { code: 'unsupported_format', meaning: 'the bytes are no image format cutout reads' },
  animation_too_large: { code: 'image_too_large', meaning: 'an animation over the frame count or the pixel budget (frames x width x height), or over what /remove answers synchronously' },
  missing_key: { code: 'invalid_api_key', meaning: 'no key was sent at all' },
  key_expired: { code: 'invalid_api_key', meaning: 'the key is past its expires_at' },
  not_admin: { code: 'invalid_api_key', meaning: 'an admin route was called with a customer\'s key, not the admin token (403)' },
  queue_full: { code: 'gpu_unavailable', meaning: 'the job queue (--queue-limit) or the sync waiters are full' },
  shutting_down: { code: 'gpu_unavailable', meaning: 'the server is stopping' },
  store_unavailable: { code: 'gpu_unavailable', meaning: 'the database did not answer in time' },
  results_unavailable: { code: 'gpu_unavailable', meaning: 'the object store of the results could not be reached' },
  upstream_unavailable: { code: 'gpu_unavailable', meaning: 'the upstream inference server (serve --upstream) is unavailable' },
  deadline: { code: 'processing_failed', meaning: 'past the sync deadline (504)' },
  client_closed: { code: 'processing_failed', meaning: 'the client hung up; the work was stopped' },
  output_exists: { code: 'invalid_request', meaning: 'the CLI\'s output is there already' },
  not_acceptable: { code: 'invalid_request', meaning: 'the Accept header names no format the door answers (Clipdrop\'s 406)' },
  // An option's reasons (OptionError): remove.bg's own codes for the cases it names, which its
  // dialect answers as the error's code; the other doors answer invalid_request.
  missing_source: { code: 'invalid_request', meaning: 'no image was given (remove.bg\'s code)' },
  multiple_sources: { code: 'invalid_request', meaning: 'more than one image source was given' },
  missing_image: { code: 'invalid_request', meaning: 'the upload is missing or empty (Photoroom\'s door)' },
  failed_to_read_image: { code: 'invalid_request', meaning: 'an image given as base64 or as a background cannot be read' },
  failed_image_download: { code: 'invalid_request', meaning: 'image_url could not be downloaded' },
  failed_bg_download: { code: 'invalid_request', meaning: 'bg_image_url could not be downloaded' },
  multiple_bg_sources: { code: 'invalid_request', meaning: 'a background colour and a background picture were both given' },
  invalid_format: { code: 'invalid_request', meaning: 'the format cannot be combined with the other options (zip with the matte alone)' },
  roi_exceeds_bounds: { code: 'invalid_request', meaning: 'the roi reaches past the image' },
  roi_region_empty: { code: 'invalid_request', meaning: 'the roi has no area' },
  invalid_image_url: { code: 'invalid_request', meaning: 'image_url is not an http(s) URL' },
  invalid_bg_image_url: { code: 'invalid_request', meaning: 'bg_image_url is not an http(s) URL' },
  file_too_large: { code: 'invalid_request', meaning: 'the background picture is over the input limit' },
} as const satisfies Record<string, { code: ErrorCode; meaning: string }>);

/** Which case of its code an error is: a row of ERROR_REASONS, so the compiler refuses an unlisted one. */
export type ErrorReason = keyof typeof ERROR_REASONS;

export class CutoutError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Extra response headers (Retry-After, ...). */
  readonly headers: Record<string, string>;
  /** The request parameter the error is about (a 422's `loc`), when one is. */
  readonly param: string | undefined;
  /** Which case of its code this is (`output_exists`), for a caller that acts on it: never parse the message. */
  readonly reason: ErrorReason | undefined;

  constructor(code: ErrorCode, message?: string, options: { status?: number; headers?: Record<string, string>; cause?: unknown; param?: string; reason?: ErrorReason } = {}) {
    super(message ?? ERROR_TABLE[code].message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CutoutError';
    this.code = code;
    this.status = options.status ?? ERROR_TABLE[code].status;
    this.headers = options.headers ?? {};
    this.param = options.param;
    this.reason = options.reason;
  }

  /** The reference for this code, as a path: a server answers `body(baseUrl)`, whose link is absolute. */
  get docs(): string {
    return errorDocsUrl(this.code);
  }

  /** The part 7 body, `docs` linking to the error reference of the server at `baseUrl`. */
  body(baseUrl = ''): { error: { code: ErrorCode; message: string; docs: string } } {
    return { error: { code: this.code, message: this.message, docs: errorDocsUrl(this.code, baseUrl) } };
  }

  toJSON(): { error: { code: ErrorCode; message: string; docs: string } } {
    return this.body();
  }
}

/**
 * What an aborted call rejects with: the signal's reason when it is a CutoutError (the server's
 * sync deadline) or an error named AbortError (AbortController's default); else an AbortError
 * that carries the reason as its cause, as fetch does.
 */
export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof CutoutError || (reason instanceof Error && reason.name === 'AbortError')) return reason;
  const err = new DOMException('The operation was aborted', 'AbortError');
  if (reason !== undefined) Object.defineProperty(err, 'cause', { value: reason });
  return err;
}

/**
 * Maps anything thrown to a CutoutError. Unknown exceptions become `processing_failed` with the
 * generic message, so internals never reach a client.
 */
export function toCutoutError(err: unknown): CutoutError {
  if (err instanceof CutoutError) return err;
  return new CutoutError('processing_failed', undefined, { cause: err });
}

/** A file-system refusal for lack of rights (EACCES, EPERM). */
export function isPermissionError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException)?.code;
  return code === 'EACCES' || code === 'EPERM';
}

/** A file-system error in a few words for a one-line message ("permission denied", "ENOTDIR"). */
export function fsReason(err: unknown): string {
  if (isPermissionError(err)) return 'permission denied';
  return (err as NodeJS.ErrnoException)?.code ?? String((err as Error)?.message ?? err).split('\n')[0];
}

/**
 * Text made safe for one terminal line: control characters (a newline or an escape sequence in a
 * file name) are shown escaped, so a name cannot split a message or drive the terminal.
 */
export function oneLine(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => (c === '\n' ? '\\n' : c === '\t' ? '\\t' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`));
}
