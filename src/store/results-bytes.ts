/**
 * The seam for result bytes: where a result image lives, apart from its row. Three places sit
 * behind it, chosen once when the store opens and independently of the SQL engine:
 *   - files in the data directory (results-files.ts): the default beside SQLite;
 *   - the results row itself, as BYTEA (results-postgres.ts): the default beside PostgreSQL;
 *   - an S3-compatible object store (results-s3.ts): `--results s3://BUCKET[/PREFIX]`, beside either.
 * The row (results.ts) holds a `location` (a file path, or an object key) or, for the database,
 * the bytes; nothing above the store knows which.
 *
 * A result is written whole before the transaction that records it (ledger.ts recordRun) and
 * its row only inside it, so a result that is read always exists, and a result that was charged
 * always has its bytes. A put that fails leaves nothing readable (a file is renamed into place,
 * an S3 PutObject is atomic); one whose transaction then fails is removed again.
 */
import type { Readable } from 'node:stream';
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';
import type { Db, Queryable } from './sql.js';
import type { ResultFields } from '../result-fields.js';

export type ResultPlacementKind = 'files' | 'database' | 's3';

/** A result written, ready to be recorded by its row (or removed when the transaction fails). */
export interface StagedResult {
  /** Where the bytes are (a file path, an object key); null when they go in the row. */
  location: string | null;
  /** The bytes to insert with the row (the database placement); null otherwise. */
  inline: Buffer | null;
}

/** A stored result's row, without its bytes. */
export interface ResultRow {
  jobId: string;
  contentType: string;
  width: number;
  height: number;
  createdAt: number;
  location: string | null;
  /** What the result says of itself (result-fields.ts), from its `result_fields` column; null for rows stored before it was kept. */
  fields: Partial<ResultFields> | null;
}

export interface OpenedResult {
  body: Readable;
  /** Bytes in the body, when known (Content-Length). */
  size: number | null;
}

export interface ResultPlacement {
  readonly kind: ResultPlacementKind;
  /** How /readyz and the logs name it: "s3://bucket/prefix", the results folder. No secrets. */
  readonly description: string;
  /** Writes the result whole. `name` is unique per attempt (`<id>` or `<id>.<attempt>`). */
  put(name: string, ext: string, data: Buffer, contentType: string): Promise<StagedResult>;
  /** The bytes of a stored row as a stream; null when they are gone (purged meanwhile). */
  open(q: Queryable, row: ResultRow): Promise<OpenedResult | null>;
  /** Removes the bytes of rows already deleted (or of staged results never recorded). Best effort. */
  remove(locations: string[]): Promise<void>;
  /** A URL that fetches the bytes without this server until `expiresInSeconds`; absent: cannot. */
  presign?(row: ResultRow, expiresInSeconds: number): Promise<string>;
  /** Bytes no row points to and older than `cutoff` (a crash between the put and the commit). */
  sweepStrays?(db: Db, cutoff: number): Promise<void>;
  /** One trivial round trip (readiness); throws when the place cannot be reached. */
  ping(): Promise<void>;
  close(): void;
}

/**
 * The place where result bytes live did not answer, or refused (an object store down, timing
 * out, or denying). Nothing was recorded: a job goes back to the queue as in an inference outage
 * (never lost, never charged), a request is answered 503 with Retry-After, never a hang.
 */
export class ResultsUnavailable extends CutoutError {
  constructor(cause: unknown) {
    super('gpu_unavailable', 'The service\'s result storage could not be reached; nothing was charged. Retry shortly.', {
      headers: { 'Retry-After': String(LIMITS.objectStoreRetryAfterSeconds) },
      cause,
      reason: 'results_unavailable',
    });
  }
}
