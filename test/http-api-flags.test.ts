/**
 * docs/http-api.md's flag table of `cutout serve` against the settings table (src/settings.ts),
 * which `serve --help` prints: every flag of serve has a row, and a row names the environment
 * variable of its setting (issue 51: the table lacked variables that --help lists).
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { SETTINGS } from '../src/settings.js';
import { ROOT } from './helpers/cli.js';

const doc = fs.readFileSync(path.join(ROOT, 'docs', 'http-api.md'), 'utf8');
const section = doc.slice(doc.indexOf('\n## Flags\n'), doc.indexOf('\n## ', doc.indexOf('\n## Flags\n') + 1));
const rows = section.split('\n').filter((l) => l.startsWith('| `-')).map((l) => l.split(/(?<!\\)\|/).map((c) => c.trim()).slice(1, -1));

t.test("every serve setting has a row in docs/http-api.md's flag table, with its variable", async (t) => {
  t.ok(rows.length > 20, `the table was found (${rows.length} rows)`);
  for (const setting of SETTINGS) {
    const flag = setting.flags.serve;
    if (!flag) continue;
    const long = flag.split(/[ ,]/).find((w) => w.startsWith('--'))!;
    const row = rows.find(([flags]) => new RegExp(`\`${long}(?![\\w-])`).test(flags));
    t.ok(row, `${long} has a row`);
    if (row && setting.env) t.match(row[1], new RegExp(`\`${setting.env}\``), `${long}: its variable ${setting.env} is named`);
  }
});
