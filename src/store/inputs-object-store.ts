/**
 * Job inputs beside the results in an object store (`--results s3://...`): an uploaded job's
 * image is put in the bucket under `inputs/<job id>` before the transaction that queues the job,
 * and the job's `input_path` (a column both engines have) holds the object's key. So a fleet
 * under load does not grow its database and WAL by every upload (a 25 MB image each), and no
 * server's disk holds what another server needs. The object is deleted when the job ends.
 *
 * An upload the object store refuses or does not answer is ResultsUnavailable (503 with
 * Retry-After): nothing is queued, nothing charged. An object put by a submission whose
 * transaction then failed is deleted again; one left by a crash between the put and the commit
 * is swept by removeOrphans of the finished jobs, and otherwise by the bucket's lifecycle rule
 * (docs/fleet.md).
 */
import type { Readable } from 'node:stream';
import type { JobInputs, Staged } from './engine.js';
import type { ResultPlacement } from './results-bytes.js';

async function readAll(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function objectStoreJobInputs(place: ResultPlacement): JobInputs {
  const keyOf = async (q: Parameters<JobInputs['read']>[0], jobId: string) =>
    (await q.get<{ input_path: string | null }>('SELECT input_path FROM jobs WHERE id = ?', [jobId]))?.input_path ?? null;
  return {
    async stage(jobId, data) {
      const staged = await place.put(`inputs/${jobId}`, 'input', data, 'application/octet-stream');
      return { path: staged.location, data: null };
    },
    async insert(tx, jobId, staged) {
      await tx.run('UPDATE jobs SET input_path = ? WHERE id = ?', [staged.path, jobId]);
    },
    async discard(staged: Staged) {
      if (staged.path) await place.remove([staged.path]).catch(() => undefined);
    },
    async read(q, jobId) {
      const key = await keyOf(q, jobId);
      if (!key) return null;
      const opened = await place.open(q, { jobId, contentType: 'application/octet-stream', width: 0, height: 0, createdAt: 0, location: key, fields: null });
      return opened ? readAll(opened.body) : null;
    },
    async remove(q, jobId) {
      const key = await keyOf(q, jobId);
      if (!key) return;
      // On failure the key stays on the finished job, for removeOrphans to try again.
      const removed = await place.remove([key]).then(() => true, () => false);
      if (removed) await q.run("UPDATE jobs SET input_path = NULL WHERE id = ? AND status IN ('done', 'failed')", [jobId]);
    },
    async removeOrphans(db) {
      // The inputs of finished jobs whose deletion failed when they ended; cleared so they are tried once.
      const rows = await db.all<{ id: string; input_path: string }>("SELECT id, input_path FROM jobs WHERE status IN ('done', 'failed') AND input_path IS NOT NULL");
      if (rows.length === 0) return 0;
      await place.remove(rows.map((r) => r.input_path));
      for (const r of rows) await db.run('UPDATE jobs SET input_path = NULL WHERE id = ?', [r.id]);
      return rows.length;
    },
  };
}
