/**
 * The results row's INSERT, inside the run's transaction (ledger.ts recordRun): the same SQL on
 * both engines; the bytes themselves only with the database placement (results-postgres.ts), and
 * what the result says of itself in `result_fields` (results.ts findResult reads it back).
 */
import type { ResultRow, StagedResult } from './results-bytes.js';
import type { Queryable, SqlParam } from './sql.js';
import { storedResultFields } from '../result-fields.js';

/** Records a result staged by the placement, inside the run's transaction. */
export async function insertResultIn(
  tx: Queryable, staged: StagedResult, meta: Omit<ResultRow, 'location'>,
): Promise<void> {
  // The result's fields as one JSON column (result-fields.ts): a new field needs no new column.
  const columns = ['job_id', 'path', 'content_type', 'width', 'height', 'created_at', 'result_fields'];
  const values: SqlParam[] = [meta.jobId, staged.location, meta.contentType, meta.width, meta.height, meta.createdAt, storedResultFields(meta.fields)];
  if (staged.inline) {
    columns.push('data');
    values.push(staged.inline);
  }
  await tx.run(`INSERT INTO results (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`, values);
}
