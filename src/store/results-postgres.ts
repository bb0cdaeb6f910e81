/**
 * Result bytes in the results row itself, as BYTEA (the seam: results-bytes.ts): the default
 * beside PostgreSQL, so any server of a fleet serves any result with nothing but the database.
 * The bytes go in with the row, inside the run's transaction; they are read back in slices
 * (LIMITS.postgresResultSliceBytes), so a download never holds a whole result in memory.
 */
import { Readable } from 'node:stream';
import { LIMITS } from '../limits.js';
import type { ResultPlacement } from './results-bytes.js';

export const databaseResults: ResultPlacement = {
  kind: 'database',
  description: 'the store',
  async put(_name, _ext, data) {
    return { location: null, inline: data };
  },
  async open(q, row) {
    const sized = await q.get<{ n: number | null }>('SELECT octet_length(data) AS n FROM results WHERE job_id = ?', [row.jobId]);
    const size = sized?.n ?? null;
    if (size === null) return null;
    const slice = LIMITS.postgresResultSliceBytes;
    async function* slices() {
      for (let from = 0; from < size!; from += slice) {
        // substring() counts from 1. A row purged mid-download ends the stream with an error.
        const part = await q.get<{ chunk: Buffer | null }>('SELECT substring(data from ? for ?) AS chunk FROM results WHERE job_id = ?', [from + 1, slice, row.jobId]);
        if (!part?.chunk) throw new Error('the result was deleted while it was read');
        yield part.chunk;
      }
    }
    return { body: Readable.from(slices(), { objectMode: false }), size };
  },
  async remove() {
    // The bytes went with their row.
  },
  async ping() {
    // The bytes are the store's: its own probe covers them.
  },
  close() {},
};
