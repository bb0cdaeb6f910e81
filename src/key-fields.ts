/**
 * A key's operator fields as the doors spell them (the admin API's JSON, `cutout keys create`'s
 * flags): `expires_at` (an ISO 8601 time with its zone, or null), `rate_limit` (requests per
 * minute, or null for the server's) and `labels` (an object of strings). One parser for both doors,
 * so that the API and the CLI accept the same values; the store checks the ranges (ledger.ts).
 */
import { CutoutError } from './errors.js';
import type { KeyLimits } from './store/ledger.js';

function bad(param: string, what: string, got: unknown): CutoutError {
  return new CutoutError('invalid_request', `Expected ${what} for ${param} but received ${JSON.stringify(got)}`, { param });
}

/** ISO 8601 with a zone (`2027-01-31T00:00:00Z`, `...+02:00`): a time that means one instant everywhere. */
const ISO_WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/** `expires_at`: ms since the epoch, or null (never). */
export function parseExpiresAt(v: unknown, param = 'expires_at'): number | null {
  if (v === null) return null;
  const ms = typeof v === 'string' && ISO_WITH_ZONE.test(v) ? Date.parse(v) : Number.NaN;
  // A flag cannot be null; a JSON field can.
  if (!Number.isFinite(ms)) throw bad(param, `an ISO 8601 time with its zone (2027-01-31T00:00:00Z)${param.startsWith('--') ? '' : ' or null'}`, v);
  return ms;
}

/** `rate_limit`: a whole number of requests per minute, or null (the server's --rate-limit). */
export function parseRateLimit(v: unknown, param = 'rate_limit'): number | null {
  if (v === null) return null;
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) throw bad(param, `a whole number of requests per minute above 0${param.startsWith('--') ? '' : ', or null'}`, v);
  return n;
}

/** `labels`: an object whose values are strings (null clears them). */
export function parseLabels(v: unknown, param = 'labels'): Record<string, string> | null {
  if (v === null) return null;
  if (typeof v !== 'object' || Array.isArray(v) || Object.values(v as object).some((x) => typeof x !== 'string')) {
    throw bad(param, 'an object of string labels', v);
  }
  return { ...(v as Record<string, string>) };
}

/** `--label k=v` (repeated) as labels. */
export function labelsOfFlags(flags: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const flag of flags) {
    const at = flag.indexOf('=');
    if (at < 1) throw bad('--label', 'NAME=VALUE', flag);
    labels[flag.slice(0, at)] = flag.slice(at + 1);
  }
  return labels;
}

/** The fields of `body` that are present, parsed (absent stays absent: a PATCH changes only what it names). */
export function keyLimitsOf(body: Record<string, unknown>): KeyLimits {
  return {
    ...('expires_at' in body ? { expiresAt: parseExpiresAt(body.expires_at) } : {}),
    ...('rate_limit' in body ? { rateLimit: parseRateLimit(body.rate_limit) } : {}),
    ...('labels' in body ? { labels: parseLabels(body.labels) } : {}),
  };
}
