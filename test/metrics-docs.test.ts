/**
 * Every metric of cutout's own is a row of the metrics tables (src/server/metrics.ts: GAUGES and
 * EVENT_METRICS, listed together as METRIC_ROWS), and docs/fleet.md's tables list exactly those,
 * with their types and labels (issue 53: the list was not checked).
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { METRIC_ROWS, ServerMetrics } from '../src/server/metrics.js';
import { ROOT } from './helpers/cli.js';

const doc = fs.readFileSync(path.join(ROOT, 'docs', 'fleet.md'), 'utf8');
/** `| \`name\` | type | labels? | what |` rows of the metric tables. */
const documented = new Map<string, { type: string; labels: string[] | null }>();
for (const line of doc.split('\n').filter((l) => l.startsWith('| `cutout_'))) {
  const cells = line.split(/(?<!\\)\|/).map((c) => c.trim()).slice(1, -1);
  const name = /^`([a-z_]+)`$/.exec(cells[0])?.[1];
  if (!name || !['gauge', 'counter', 'histogram'].includes(cells[1])) continue;
  // The main table has a labels column (4 cells): the label names are its backticked words outside parentheses.
  const labels = cells.length >= 4 ? [...cells[2].replace(/\([^)]*\)/g, '').matchAll(/`([a-z_]+)`/g)].map((m) => m[1]) : null;
  const seen = documented.get(name);
  documented.set(name, { type: cells[1], labels: labels ?? seen?.labels ?? null });
}

t.test("docs/fleet.md lists every metric of the tables, with its type and labels, and nothing else", async (t) => {
  t.ok(documented.size >= 10, `the tables were found (${documented.size} metrics)`);
  for (const row of METRIC_ROWS) {
    const d = documented.get(row.name);
    t.ok(d, `${row.name} is documented`);
    if (!d) continue;
    t.equal(d.type, row.type, `${row.name}: a ${row.type}`);
    if (d.labels) t.same([...d.labels].sort(), [...row.labelNames].sort(), `${row.name}: labels ${row.labelNames.join(', ') || 'none'}`);
  }
  const rows = new Set(METRIC_ROWS.map((r) => r.name));
  t.same([...documented.keys()].filter((n) => !rows.has(n)), [], 'no documented metric that the tables lack');
});

t.test('the registry of a server holds exactly the rows that every server has', async (t) => {
  const metrics = new ServerMetrics({
    store: { kind: 'sqlite', jobs: { counts: async () => ({ queued: 0, processing: 0 }) }, fleet: { onHeartbeatFailure: () => undefined } },
    pool: { stats: () => ({ queued: 0, processing: 0, sync: { waiting: 0, running: 0 }, jobs: { waiting: 0, running: 0 } }), size: 1 },
    readiness: { check: async () => ({ ready: true }) },
  });
  const exposed = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name).filter((n) => n.startsWith('cutout_')));
  // Without an object store of results, its two gauges are left out (their `when`).
  const expected = METRIC_ROWS.map((r) => r.name).filter((n) => !n.startsWith('cutout_results_'));
  t.same([...exposed].sort(), expected.sort(), 'every row is registered, and nothing outside the tables');
});
