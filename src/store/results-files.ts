/**
 * Result bytes as files in the data directory, `<dataDir>/results/<name>.<ext>` (the seam:
 * results-bytes.ts): the default beside SQLite, whose servers all run on one host. Written to a
 * temporary name and renamed, so a file that can be read is whole; the row holds its path.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { writeAtomically } from './engine-sqlite.js';
import type { ResultPlacement } from './results-bytes.js';

export function resultsDir(dataDir: string): string {
  return path.join(dataDir, 'results');
}

export function fileResults(dataDir: string): ResultPlacement {
  const dir = resultsDir(dataDir);
  return {
    kind: 'files',
    description: dir,
    async put(name, ext, data) {
      return { location: await writeAtomically(path.join(dir, `${name}.${ext}`), data, false), inline: null };
    },
    async open(_q, row) {
      if (!row.location || !path.isAbsolute(row.location)) return null;
      // Opened before answering: the purge may have removed the file after the lookup (same as expired).
      const handle = await fs.open(row.location, 'r').catch(() => null);
      if (!handle) return null;
      const { size } = await handle.stat();
      return { body: handle.createReadStream(), size };
    },
    async remove(locations) {
      // Only files: never a relative name (an object key of another placement) against the working directory.
      await Promise.all(locations.filter((file) => path.isAbsolute(file)).map((file) => fs.rm(file, { force: true }).catch(() => undefined)));
    },
    async sweepStrays(db, cutoff) {
      for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
        const file = path.join(dir, name);
        const stat = await fs.stat(file).catch(() => null);
        if (!stat || !stat.isFile() || stat.mtimeMs > cutoff) continue;
        if (!(await db.get('SELECT 1 FROM results WHERE path = ?', [file]))) await fs.rm(file, { force: true }).catch(() => undefined);
      }
    },
    async ping() {
      // The data directory is this host's disk: the store's own probe covers it.
    },
    close() {},
  };
}
