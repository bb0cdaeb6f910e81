/**
 * PostgreSQL's side of the engine seam (src/store/engine.ts): result and job-input bytes in BYTEA
 * columns, so any server serves any result and runs any job, and a claim's owner judged alive by
 * its heartbeat row in `servers` (written every third of its lease; a server killed with -9 stops
 * writing it and is gone once its lease has passed).
 */
import { POSTGRES_NOW_MS } from './clock.js';
import type { Liveness, Payloads, StoredResultRow } from './engine.js';

export const byteaPayloads: Payloads = {
  async stageResult(_name, _ext, data) {
    return { path: null, data };
  },
  async insertResult(tx, staged, meta) {
    await tx.run('INSERT INTO results (job_id, data, content_type, width, height, created_at) VALUES (?, ?, ?, ?, ?, ?)', [
      meta.jobId, staged.data, meta.contentType, meta.width, meta.height, meta.createdAt,
    ]);
  },
  async discard() {
    // Nothing outside the rolled-back transaction.
  },
  async readResult(q, jobId, sinceMs): Promise<StoredResultRow | null> {
    const row = await q.get<{ job_id: string; data: Buffer; content_type: string; width: number; height: number; created_at: number }>(
      'SELECT job_id, data, content_type, width, height, created_at FROM results WHERE job_id = ? AND created_at > ?', [jobId, sinceMs],
    );
    return row ? { jobId: row.job_id, contentType: row.content_type, width: row.width, height: row.height, createdAt: row.created_at, data: row.data } : null;
  },
  async purgeResults(db, cutoff) {
    // One statement: servers purging at once each delete disjoint rows (or none); nothing to clean on disk.
    return (await db.run('DELETE FROM results WHERE created_at <= ?', [cutoff])).changes;
  },

  async stageJobInput(_jobId, data) {
    return { path: null, data };
  },
  async insertJobInput(tx, jobId, staged) {
    await tx.run('INSERT INTO job_inputs (job_id, data) VALUES (?, ?)', [jobId, staged.data]);
  },
  async readJobInput(q, jobId) {
    const row = await q.get<{ data: Buffer }>('SELECT data FROM job_inputs WHERE job_id = ?', [jobId]);
    return row?.data ?? null;
  },
  async removeJobInput(q, jobId) {
    await q.run("DELETE FROM job_inputs WHERE job_id = ? AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = ? AND status IN ('queued', 'processing'))", [jobId, jobId]);
  },
  async sharedSecret(db, name, generate) {
    await db.run('INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING', [name, generate(), Date.now()]);
    return ((await db.get<{ value: string }>('SELECT value FROM secrets WHERE name = ?', [name])) as { value: string }).value;
  },
  async removeOrphanJobInputs(db) {
    const { changes } = await db.run(
      "DELETE FROM job_inputs i WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = i.job_id AND j.status IN ('queued', 'processing'))",
    );
    return changes;
  },
};

export const heartbeatLiveness: Liveness = {
  knowsDeathBeforeLease: false,
  async ownerAlive(q, owner, _ownerPid, self) {
    if (owner === null) return false;
    if (owner === self) return true;
    // By the database's clock (clock.ts): a server whose own clock is off cannot judge a live peer dead.
    const row = await q.get<{ alive: number }>(`SELECT CASE WHEN heartbeat_at + lease_ms > ${POSTGRES_NOW_MS} THEN 1 ELSE 0 END AS alive FROM servers WHERE id = ?`, [owner]);
    return row !== undefined && Number(row.alive) === 1;
  },
};
