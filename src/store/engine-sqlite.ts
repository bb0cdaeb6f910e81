/**
 * SQLite's side of the engine seam (src/store/engine.ts): job-input bytes as files in the data
 * directory, `<dataDir>/jobs/<id>.input`, written to a temporary name, fsynced (so a job accepted
 * with 202 runs after a power cut) and renamed; shared secrets as files beside them; and a
 * claim's owner judged alive by a signal-0 probe of its pid: every server on one SQLite file runs
 * on this host. (Result files: results-files.ts.)
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { serverIdentity } from '../identity.js';
import type { JobInputs, Liveness, SharedSecrets, Staged } from './engine.js';
import type { Db, Queryable } from './sql.js';

export function jobInputsDir(dataDir: string): string {
  return path.join(dataDir, 'jobs');
}

/**
 * Writes `data` under a temporary name, then gives it `file`'s name, never replacing a file that
 * exists (that one belongs to another writer, and deleting ours must not delete theirs): then a
 * unique name beside it. Returns the name written.
 */
export async function writeAtomically(file: string, data: Buffer, durable: boolean): Promise<string> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  const handle = await fs.open(tmp, 'w', 0o600);
  try {
    await handle.writeFile(data);
    if (durable) await handle.sync();
  } finally {
    await handle.close();
  }
  let target = file;
  try {
    await fs.link(tmp, target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
      await fs.rm(tmp, { force: true });
      throw err;
    }
    const ext = path.extname(file);
    target = `${file.slice(0, file.length - ext.length)}.${crypto.randomBytes(4).toString('hex')}${ext}`;
    await fs.link(tmp, target);
  }
  await fs.rm(tmp, { force: true });
  return target;
}

export function fileJobInputs(dataDir: string): JobInputs {
  return {
    async stage(jobId, data) {
      return { path: await writeAtomically(path.join(jobInputsDir(dataDir), `${jobId}.input`), data, true), data: null };
    },
    async insert(tx, jobId, staged) {
      await tx.run('UPDATE jobs SET input_path = ? WHERE id = ?', [staged.path, jobId]);
    },
    async discard(staged: Staged) {
      if (staged.path) await fs.rm(staged.path, { force: true }).catch(() => undefined);
    },
    async read(q, jobId) {
      const row = await q.get<{ input_path: string | null }>('SELECT input_path FROM jobs WHERE id = ?', [jobId]);
      return row?.input_path ? fs.readFile(row.input_path).catch(() => null) : null;
    },
    async remove(q, jobId) {
      const row = await q.get<{ input_path: string | null }>('SELECT input_path FROM jobs WHERE id = ?', [jobId]);
      if (row?.input_path) await fs.rm(row.input_path, { force: true }).catch(() => undefined);
    },
    async removeOrphans(db, now) {
      const dir = jobInputsDir(dataDir);
      const names = await fs.readdir(dir).catch(() => [] as string[]);
      if (names.length === 0) return 0;
      const rows = await db.all<{ input_path: string }>("SELECT input_path FROM jobs WHERE status IN ('queued', 'processing') AND input_path IS NOT NULL");
      const needed = new Set(rows.map((r) => r.input_path));
      let removed = 0;
      for (const name of names) {
        const file = path.join(dir, name);
        if (needed.has(file)) continue;
        // A file being written right now for a submission in flight is young: leave it.
        const stat = await fs.stat(file).catch(() => null);
        if (!stat || now - stat.mtimeMs < 60_000) continue;
        await fs.rm(file, { force: true }).catch(() => undefined);
        removed++;
      }
      return removed;
    },
  };
}

/** Secrets as files in the data directory (every server on one SQLite file shares it). */
export function fileSecrets(dataDir: string): SharedSecrets {
  return (_db, name, generate) => fileSecret(dataDir, name, generate);
}

/**
 * A secret kept in `<dataDir>/<name>` (mode 0600), generated once. Every server on one SQLite
 * file shares its data directory, so they share the file.
 */
async function fileSecret(dataDir: string, name: string, generate: () => string): Promise<string> {
  const file = path.join(dataDir, name);
  await fs.mkdir(dataDir, { recursive: true });
  try {
    // 'wx': of two processes starting at once, exactly one creates the file; the other reads it.
    const secret = generate();
    // No trailing newline: the file's bytes are the key, so a receiver that reads it as is agrees.
    await fs.writeFile(file, secret, { mode: 0o600, flag: 'wx' });
    return secret;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const stat = await fs.stat(file);
  if ((stat.mode & 0o077) !== 0) await fs.chmod(file, 0o600).catch(() => undefined);
  // Surrounding whitespace is not part of the key: a newline an operator's editor added is tolerated.
  const secret = (await fs.readFile(file, 'utf8')).trim();
  if (secret === '') throw new Error(`${file} is empty; delete it to generate a new secret`);
  return secret;
}

/** Whether a process of this host runs; EPERM: it runs, as another user. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** host and pid of an identity `host:pid:start:random`. */
export function parseIdentity(id: string): { host: string; pid: number } | null {
  const parts = id.split(':');
  if (parts.length < 4) return null;
  const pid = Number(parts[parts.length - 3]);
  return Number.isInteger(pid) ? { host: parts.slice(0, -3).join(':'), pid } : null;
}

export const pidLiveness: Liveness = {
  knowsDeathBeforeLease: true,
  async ownerAlive(_q: Queryable, owner: string | null, ownerPid: number | null, self: string) {
    const me = serverIdentity();
    if (owner === self) return true;
    const parsed = owner === null ? null : parseIdentity(owner);
    // Another host on one SQLite file cannot be probed: its lease decides.
    if (parsed && parsed.host !== os.hostname()) return true;
    const pid = ownerPid ?? parsed?.pid ?? null;
    if (pid === null) return false; // made before owners were recorded, by a process gone since
    // Our own pid under another identity: an earlier process that had the same pid.
    if (pid === me.pid) return owner === null;
    return pidAlive(pid);
  },
};
