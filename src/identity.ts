/**
 * Who this process is, for a fleet: a server's identity is its host, its pid and when it started.
 * A bare pid is not enough once several machines share a store (pids repeat across hosts and
 * after restarts). Idempotency claims, job leases and health all name the server by `id`.
 */
import os from 'node:os';
import { randomBytes } from 'node:crypto';

export interface ServerIdentity {
  host: string;
  pid: number;
  /** ISO 8601 time this process started. */
  startedAt: string;
  /** `host:pid:startMillis:random`, unique across the fleet and across restarts. */
  id: string;
}

const startedMs = Date.now();
const identity: ServerIdentity = Object.freeze({
  host: os.hostname(),
  pid: process.pid,
  startedAt: new Date(startedMs).toISOString(),
  id: `${os.hostname()}:${process.pid}:${startedMs}:${randomBytes(3).toString('hex')}`,
});

/** This process's identity; the same object for the life of the process. */
export function serverIdentity(): ServerIdentity {
  return identity;
}
