/**
 * What differs between the two engines beyond SQL words: where the bytes of results and job
 * inputs live, and how a claim's owner is known to be gone. SQLite keeps bytes as files in the
 * data directory and asks the OS whether the owner's process runs (every server on one SQLite
 * file runs on this host); PostgreSQL keeps bytes in BYTEA columns (no server's disk holds what
 * another server needs) and reads the owner's heartbeat in the `servers` table.
 *
 * Storing is staged so that SQLite's slow part (writing and fsyncing a file) happens before its
 * single-connection transaction, and PostgreSQL's insert happens inside it.
 */
import type { Db, Queryable } from './sql.js';

/** Bytes ready to be recorded by insert*, or discarded when the transaction fails. */
export interface Staged {
  /** SQLite: the file written. */
  path: string | null;
  /** PostgreSQL: the bytes, inserted inside the transaction. */
  data: Buffer | null;
}

export interface ResultMeta { jobId: string; contentType: string; width: number; height: number; createdAt: number }

export interface StoredResultRow extends Omit<ResultMeta, 'createdAt'> {
  createdAt: number;
  data: Buffer;
}

export interface Payloads {
  /** `name`: unique per attempt (a run that lost its claim discards only its own bytes). */
  stageResult(name: string, ext: string, data: Buffer): Promise<Staged>;
  insertResult(tx: Queryable, staged: Staged, meta: ResultMeta): Promise<void>;
  discard(staged: Staged): Promise<void>;
  /** The result with its bytes, when younger than `sinceMs`; null when unknown, expired or gone. */
  readResult(q: Queryable, jobId: string, sinceMs: number): Promise<StoredResultRow | null>;
  /** Deletes results created at or before `cutoff` (and, for files, strays). Safe on many servers at once. */
  purgeResults(db: Db, cutoff: number): Promise<number>;

  stageJobInput(jobId: string, data: Buffer): Promise<Staged>;
  /** Inside the transaction that inserted the job row. */
  insertJobInput(tx: Queryable, jobId: string, staged: Staged): Promise<void>;
  readJobInput(q: Queryable, jobId: string): Promise<Buffer | null>;
  /** After the job's final state: its input is no longer needed. */
  removeJobInput(q: Queryable, jobId: string): Promise<void>;
  /** Inputs no queued or processing job needs (a crash between stage and insert). */
  removeOrphanJobInputs(db: Db, now: number): Promise<number>;

  /**
   * A secret shared by every server of the store (the callback signing key), generated once by
   * `generate` and the same ever after: of servers starting at once, exactly one generates it.
   */
  sharedSecret(db: Db, name: string, generate: () => string): Promise<string>;
}

export interface Liveness {
  /**
   * Whether a dead owner can be known before its lease runs out (a pid probe can; a heartbeat
   * cannot, it stops at the same pace as the lease renewals). When false, only expired leases
   * are looked at, which keeps the sweep of a large fleet to one indexed query.
   */
  readonly knowsDeathBeforeLease: boolean;
  /**
   * Whether the server that made a claim may still be running. `owner` is a server identity
   * (src/identity.ts); `ownerPid` the bare pid of claims made before identities were recorded;
   * `self` the identity of the store asking (its own claims are alive).
   */
  ownerAlive(q: Queryable, owner: string | null, ownerPid: number | null, self: string): Promise<boolean>;
}
