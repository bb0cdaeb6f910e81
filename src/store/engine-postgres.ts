/**
 * PostgreSQL's side of the engine seam (src/store/engine.ts): job-input bytes in a BYTEA table and
 * shared secrets in a table, so any server runs any job, and a claim's owner judged alive by its
 * heartbeat row in `servers` (written every third of its lease; a server killed with -9 stops
 * writing it and is gone once its lease has passed). (Result bytes in the row: results-postgres.ts.)
 */
import { POSTGRES_NOW_MS } from './clock.js';
import type { JobInputs, Liveness, SharedSecrets } from './engine.js';

export const byteaJobInputs: JobInputs = {
  async stage(_jobId, data) {
    return { path: null, data };
  },
  async insert(tx, jobId, staged) {
    await tx.run('INSERT INTO job_inputs (job_id, data) VALUES (?, ?)', [jobId, staged.data]);
  },
  async discard() {
    // Nothing outside the rolled-back transaction.
  },
  async read(q, jobId) {
    const row = await q.get<{ data: Buffer }>('SELECT data FROM job_inputs WHERE job_id = ?', [jobId]);
    return row?.data ?? null;
  },
  async remove(q, jobId) {
    await q.run("DELETE FROM job_inputs WHERE job_id = ? AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = ? AND status IN ('queued', 'processing'))", [jobId, jobId]);
  },
  async removeOrphans(db) {
    const { changes } = await db.run(
      "DELETE FROM job_inputs i WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = i.job_id AND j.status IN ('queued', 'processing'))",
    );
    return changes;
  },
};

export const tableSecrets: SharedSecrets = async (db, name, generate) => {
  await db.run('INSERT INTO secrets (name, value, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING', [name, generate(), Date.now()]);
  return ((await db.get<{ value: string }>('SELECT value FROM secrets WHERE name = ?', [name])) as { value: string }).value;
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
