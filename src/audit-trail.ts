/**
 * The audit trail's doors: who an actor is, and the one JSON log line per event that goes beside
 * each row of store.audit (operator.md, "The audit trail"). The server logs on its request
 * logger's stream (stdout); the CLI on stderr, so that its stdout stays the command's answer.
 */
import os from 'node:os';
import type { Logger } from 'pino';
import type { AuditActor, AuditEvent } from './store/db.js';

/** Writes an event's log line: the row as stored, under `audit`, with its request id. */
export function logAuditEvent(logger: Pick<Logger, 'info'>, event: AuditEvent): void {
  const { requestId, ...audit } = event;
  logger.info({ audit, ...(requestId ? { requestId } : {}) }, 'audit event');
}

/** The actor of a CLI change: `cli:<os user>` (the account running the command). */
export function cliActorName(): string {
  let user: string;
  try {
    user = os.userInfo().username;
  } catch {
    // No passwd entry (a container's numeric user): the uid.
    user = String(process.getuid?.() ?? 'unknown');
  }
  return `cli:${user}`;
}

/** The CLI's actor, logging each event as one JSON line on stderr (pino, loaded only here). */
export async function cliActor(): Promise<AuditActor> {
  const { pino, stdTimeFunctions } = await import('pino');
  const logger = pino({ base: undefined, timestamp: stdTimeFunctions.isoTime, formatters: { level: (label) => ({ level: label }) } }, pino.destination({ dest: 2, sync: true }));
  return { actor: cliActorName(), requestId: null, onRecorded: (event) => logAuditEvent(logger, event) };
}
