/**
 * The key that signs callbacks: CUTOUT_CALLBACK_SECRET (config.callbackSecret) when set,
 * otherwise a random secret generated once and kept by the store, so signatures stay valid across
 * restarts and are the same from every server of a fleet: `<dataDir>/callback-secret` (mode 0600)
 * for SQLite, a row of the database for PostgreSQL. `cutout` never prints it; an operator shares
 * it with a receiver by reading that file (or row), or sets CUTOUT_CALLBACK_SECRET everywhere.
 * The file holds the key alone, without a trailing newline (a receiver reading it as is agrees);
 * whitespace around it, as an editor may add, is not part of the key (docs/http-api.md, Callbacks).
 */
import crypto from 'node:crypto';
import type { Store } from '../store/db.js';

export const CALLBACK_SECRET_FILE = 'callback-secret';

function newSecret(): string {
  return crypto.randomBytes(32).toString('hex');
}

/** The callback secret of a store (or the configured one). */
export function callbackSecretOf(store: Store, configured: string | null): Promise<string> {
  if (configured !== null && configured !== '') return Promise.resolve(configured);
  return store.fleet.sharedSecret(CALLBACK_SECRET_FILE, newSecret);
}

/** `sha256=<hex HMAC-SHA256 of the raw body>`, the X-Service-Signature header value. */
export function signBody(body: string | Buffer, secret: string): string {
  return `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;
}
