/**
 * The results row's INSERT, inside the run's transaction (ledger.ts recordRun): the same SQL on
 * both engines; the bytes themselves only with the database placement (results-postgres.ts).
 */
import type { ResultRow, StagedResult } from './results-bytes.js';
import type { Queryable } from './sql.js';

/** Records a result staged by the placement, inside the run's transaction. */
export async function insertResultIn(
  tx: Queryable, staged: StagedResult, meta: Omit<ResultRow, 'location'>,
): Promise<void> {
  const columns = 'job_id, path, content_type, width, height, created_at';
  const values = [meta.jobId, staged.location, meta.contentType, meta.width, meta.height, meta.createdAt];
  if (staged.inline) await tx.run(`INSERT INTO results (${columns}, data) VALUES (?, ?, ?, ?, ?, ?, ?)`, [...values, staged.inline]);
  else await tx.run(`INSERT INTO results (${columns}) VALUES (?, ?, ?, ?, ?, ?)`, values);
}
