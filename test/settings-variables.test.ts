/**
 * Every `CUTOUT_*` variable that src/ names is a row of the settings table (src/settings.ts), and
 * one read outside the config loader is a `process` row that names its reader (issue 53): a new
 * variable cannot be read behind the table's back, nor a row outlive its reader.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { SETTINGS, type SettingRow } from '../src/settings.js';
import { ROOT } from './helpers/cli.js';

const rows = SETTINGS as readonly SettingRow[];
const byEnv = new Map(rows.filter((r) => r.env).map((r) => [r.env!, r]));

/** The config loader: where variables are read from the table itself. */
const LOADER = ['src/settings.ts', 'src/config.ts'];

/**
 * Reads outside the loader of a variable whose row is a setting of the configuration, each with
 * its reason; owned by others, kept here until their reader takes the value from the config.
 */
const EXCEPTIONS: Record<string, string> = {
  'src/toolchain/weights.ts CUTOUT_HOME':
    "the model cache's fallback folder when its caller gives no data directory (the library's model files); a command passes the config's dataDir",
};

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

const files = sources(path.join(ROOT, 'src')).map((p) => ({ rel: path.relative(ROOT, p).split(path.sep).join('/'), text: fs.readFileSync(p, 'utf8') }));

t.test('every CUTOUT_* name in src/ is a variable of the settings table (or a secret\'s _FILE form)', async (t) => {
  t.ok(files.length > 50, `${files.length} source files read`);
  for (const { rel, text } of files) {
    for (const m of text.matchAll(/\bCUTOUT_[A-Z0-9_]*[A-Z0-9]\b/g)) {
      const name = m[0];
      const secretFile = name.endsWith('_FILE') && byEnv.get(name.slice(0, -'_FILE'.length))?.secret;
      const line = text.slice(0, m.index).split('\n').length;
      t.ok(byEnv.has(name) || secretFile, `${rel}:${line}: ${name} is a row of the settings table`);
    }
  }
});

t.test('a variable read outside the config loader is a process row naming its reader, or a documented exception', async (t) => {
  const reads = new Set<string>();
  for (const { rel, text } of files) {
    if (LOADER.includes(rel)) continue;
    for (const m of text.matchAll(/\benv(?:\.|\[['"`])(CUTOUT_[A-Z0-9_]+)/g)) {
      const name = m[1];
      reads.add(`${rel} ${name}`);
      const row = byEnv.get(name);
      if (EXCEPTIONS[`${rel} ${name}`]) continue;
      t.ok(row?.scope === 'process' && row.readBy?.includes(rel), `${rel} reads ${name}: a process row whose readBy names ${rel}${row ? ` (its row: ${row.scope}, read by ${row.readBy ?? 'the config loader'})` : ''}`);
    }
  }
  t.ok(reads.size >= 4, `${reads.size} reads found`);
  for (const key of Object.keys(EXCEPTIONS)) t.ok(reads.has(key), `exception still needed: ${key}`);
});

t.test("each process row's readers exist and read its variable", async (t) => {
  const processRows = rows.filter((r) => r.scope === 'process');
  t.ok(processRows.length >= 4);
  for (const row of processRows) {
    const readers = row.readBy?.match(/src\/[\w/.-]+\.ts/g) ?? [];
    t.ok(readers.length > 0, `${row.env}: readBy names a file`);
    for (const reader of readers) {
      const file = files.find((f) => f.rel === reader);
      t.ok(file?.text.includes(row.env!), `${row.env}: ${reader} reads it`);
    }
  }
});
