/**
 * Stored results: files under <dataDir>/results/<job_id>.<ext>, one row each, downloadable until
 * they are older than the retention. A file is written before its row; a file without a row (a
 * crash between the two, or a failed charge) is never served and the purge deletes it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { StoreContext } from './ledger.js';

export interface StoredResult {
  jobId: string;
  /** Absolute path of the file. */
  path: string;
  contentType: string;
  width: number;
  height: number;
  createdAt: number;
}

export function resultsDir(dataDir: string): string {
  return path.join(dataDir, 'results');
}

/** Writes a result file atomically (temp file, then rename) and returns its absolute path. */
export async function writeResultFile(ctx: StoreContext, jobId: string, ext: string, data: Buffer): Promise<string> {
  const dir = resultsDir(ctx.dataDir);
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(dir, `${jobId}.${ext}`);
  const tmp = `${file}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  await fs.writeFile(tmp, data);
  await fs.rename(tmp, file);
  return file;
}

/** The stored result of `jobId`, or null when unknown or older than `ttlSeconds`. */
export async function getResult(ctx: StoreContext, jobId: string, ttlSeconds: number): Promise<StoredResult | null> {
  const row = await ctx.db.get<{ job_id: string; path: string; content_type: string; width: number; height: number; created_at: number }>(
    'SELECT job_id, path, content_type, width, height, created_at FROM results WHERE job_id = ? AND created_at > ?',
    [jobId, ctx.now() - ttlSeconds * 1000],
  );
  if (!row) return null;
  return { jobId: row.job_id, path: row.path, contentType: row.content_type, width: row.width, height: row.height, createdAt: row.created_at };
}

/**
 * Deletes results older than `ttlSeconds` (rows, then files) and stray files of the results
 * directory that have no row and are older than the retention. Returns how many results went.
 */
export async function purgeResults(ctx: StoreContext, ttlSeconds: number): Promise<number> {
  const cutoff = ctx.now() - ttlSeconds * 1000;
  const expired = await ctx.db.all<{ job_id: string; path: string }>('SELECT job_id, path FROM results WHERE created_at <= ?', [cutoff]);
  for (const r of expired) {
    // Row first: once the row is gone nothing serves the file, so deleting it cannot break a download midway.
    await ctx.db.run('DELETE FROM results WHERE job_id = ?', [r.job_id]);
    await fs.rm(r.path, { force: true }).catch(() => undefined);
  }
  const dir = resultsDir(ctx.dataDir);
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const file = path.join(dir, name);
    const stat = await fs.stat(file).catch(() => null);
    if (!stat || !stat.isFile() || stat.mtimeMs > cutoff) continue;
    const known = await ctx.db.get('SELECT 1 FROM results WHERE path = ?', [file]);
    if (!known) await fs.rm(file, { force: true }).catch(() => undefined);
  }
  return expired.length;
}
