/**
 * What differs between the two engines beyond SQL words: where the bytes of job inputs live, where
 * the fleet's shared secrets are kept, and how a claim's owner is known to be gone. SQLite keeps
 * inputs as files in the data directory, secrets in files beside them, and asks the OS whether the
 * owner's process runs (every server on one SQLite file runs on this host); PostgreSQL keeps
 * inputs in a BYTEA table, secrets in a table (no server's disk holds what another server
 * needs), and reads the owner's heartbeat in the `servers` table. Result bytes are not here: they
 * have a seam of their own, chosen apart from the engine (results-bytes.ts).
 *
 * Storing is staged so that SQLite's slow part (writing and fsyncing a file) happens before its
 * single-connection transaction, and PostgreSQL's insert happens inside it.
 */
import type { Db, Queryable } from './sql.js';

/** Bytes ready to be recorded by insertJobInput, or discarded when the transaction fails. */
export interface Staged {
  /** SQLite: the file written. */
  path: string | null;
  /** PostgreSQL: the bytes, inserted inside the transaction. */
  data: Buffer | null;
}

/** The stored inputs of uploaded jobs, kept until the job is done or failed. */
export interface JobInputs {
  stage(jobId: string, data: Buffer): Promise<Staged>;
  /** Inside the transaction that inserted the job row. */
  insert(tx: Queryable, jobId: string, staged: Staged): Promise<void>;
  discard(staged: Staged): Promise<void>;
  read(q: Queryable, jobId: string): Promise<Buffer | null>;
  /** After the job's final state: its input is no longer needed. */
  remove(q: Queryable, jobId: string): Promise<void>;
  /** Inputs no queued or processing job needs (a crash between stage and insert). */
  removeOrphans(db: Db, now: number): Promise<number>;
}

/**
 * A secret shared by every server of the store (the callback signing key), generated once by
 * `generate` and the same ever after: of servers starting at once, exactly one generates it.
 */
export type SharedSecrets = (db: Db, name: string, generate: () => string) => Promise<string>;

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
