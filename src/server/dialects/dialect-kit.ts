/**
 * What the dialects (remove.bg's, rembg's, Photoroom's and Clipdrop's doors, api-*.ts) share, so
 * that none of them imports another: the key in a header and its check, remove.bg's rule for a
 * JSON answer (Photoroom's clients follow it too), and the headers a page on another origin may
 * read (the plugin's `cors`, applied by the server to every answer under the prefix). The body
 * reader is http.ts's `readMultipart`, one intake for every door; the work is runSyncRemoval's.
 */
import type { IncomingMessage } from 'node:http';
import { CutoutError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import { resultHeaderNames, type Dialect } from '../../result-fields.js';
import type { ServerContext } from '../context.js';
import type { Caller } from '../guards.js';
import { acceptedRanges, mediaType, readMultipart, tooLarge } from '../http.js';

/** A request header's first value. */
export function headerOf(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** How a dialect takes its key, and its words when there is none or it is unknown. */
export interface KeyRule {
  /** The key may come as `Authorization: Bearer KEY` too (remove.bg's OAuth place). */
  bearer?: boolean;
  /** The message without a key (reason `missing_key`, which a dialect may render apart). */
  missing: string;
  /** The message for an unknown or revoked key. */
  invalid: string;
}

/** The caller of a key in `X-Api-Key` (or, by `rule.bearer`, a Bearer token): invalid_api_key otherwise. */
export async function keyCaller(store: ServerContext['store'], req: IncomingMessage, rule: KeyRule): Promise<Caller> {
  const bearer = rule.bearer ? /^Bearer\s+(\S+)\s*$/i.exec(headerOf(req, 'authorization') ?? '')?.[1] : undefined;
  const key = headerOf(req, 'x-api-key')?.trim() || bearer;
  if (!key) throw new CutoutError('invalid_api_key', rule.missing, { reason: 'missing_key' });
  // An expired key throws invalid_api_key with reason key_expired (ledger.ts authenticate): 401 on every door.
  const auth = await store.keys.authenticate(key);
  if (!auth) throw new CutoutError('invalid_api_key', rule.invalid);
  return { accountId: auth.accountId, keyId: auth.keyId, test: auth.test, channel: 'key', rateKey: `key:${auth.keyId}`, rateLimit: auth.rateLimit };
}

/**
 * JSON only when it is asked for and neither `*\/*` nor an image type is (removebg-api.md 3): the
 * npm client sends `application/json`; axios's default (`application/json, text/plain, *\/*`),
 * fetch's `*\/*` and no Accept at all get the image. Photoroom's `{"base64img"}` follows the same.
 */
export function wantsJsonNotImage(req: IncomingMessage): boolean {
  const types = acceptedRanges(headerOf(req, 'accept')).map((r) => r.type);
  return types.includes('application/json') && !types.some((r) => r === '*/*' || r.startsWith('image/'));
}

/** What every answer may show a page: the request's id and the rate limit's headers. */
const COMMON_EXPOSED = ['X-Request-Id', 'Retry-After', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];

/**
 * A dialect's `cors`: every origin, and these response headers readable by the page: the
 * dialect's own (`own`, first), the common ones and the result's (result-fields.ts).
 */
export function dialectCors(dialect: Dialect, own: readonly string[] = []): { exposeHeaders: string[] } {
  return { exposeHeaders: [...own, ...COMMON_EXPOSED, ...resultHeaderNames(dialect)] };
}

/**
 * A dialect's deadline: the hosted APIs answer every size synchronously, so their doors wait up to
 * remove.bg's 180 s (LIMITS.removebgTimeoutMs), or the server's `--sync-timeout` when longer.
 */
export function dialectDeadlineMs(config: Pick<ServerContext['config'], 'syncTimeoutMs'>): number {
  return Math.max(config.syncTimeoutMs, LIMITS.removebgTimeoutMs);
}

/**
 * A dialect's upload: the multipart body, read by the one intake (http.ts `readMultipart`), and
 * its image in the file part `fileField`. `missing()` is the door's own refusal when the body is
 * not multipart (drained, so that the connection carries the answer) or has no such file.
 */
export async function readUpload(req: IncomingMessage, fileField: string, missing: () => CutoutError): Promise<{ image: Buffer; fields: Record<string, string[]> }> {
  if (mediaType(req) !== 'multipart/form-data') {
    req.resume();
    throw missing();
  }
  const { fields, files } = await readMultipart(req, { maxFiles: 1 });
  const image = files[fileField]?.[0];
  if (!image || image.length === 0) throw missing();
  if (image.length > LIMITS.maxInputBytes) throw tooLarge(fileField, fileField);
  return { image, fields };
}

/** A form field's first value, trimmed; an empty one is absent (a form's empty input). */
export function fieldOf(fields: Record<string, string[]>, name: string): string | undefined {
  const v = fields[name]?.[0]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/** The status a dialect answers: its table's `base`, but a 5xx of cutout's own (504 past the deadline) and an expired key's 401 stay. */
export function statusOf(err: CutoutError, base: number): number {
  // An expired key is 401 at every door (operator.md), where a dialect answers other bad keys 403.
  if (err.reason === 'key_expired') return err.status;
  return err.status >= 500 && err.status !== base ? err.status : base;
}
