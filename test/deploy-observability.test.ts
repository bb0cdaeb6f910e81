/**
 * deploy/'s dashboards and alerts (issue 56): the Prometheus rules pass `promtool check rules` and
 * their unit tests (`promtool test rules`), every expression of the Grafana dashboard is valid
 * PromQL (promtool checks it as a recording rule), and every metric that the dashboard, the rules or
 * the KEDA ScaledObject name is one that /metrics exposes (src/server/metrics.ts's METRIC_ROWS;
 * a histogram as its _bucket, _sum and _count series).
 *
 * promtool is Debian's `prometheus` package, which .ci/run installs; without it the promtool parts
 * are skipped with the command that installs it (under CI=true they fail instead).
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { parseAllDocuments, stringify } from 'yaml';
import { METRIC_ROWS } from '../src/server/metrics.js';
import { ROOT } from './helpers/cli.js';

const PROMTOOL = '/usr/bin/promtool';
const RULES = path.join(ROOT, 'deploy', 'prometheus', 'cutout-rules.yaml');
const RULE_TESTS = path.join(ROOT, 'deploy', 'prometheus', 'cutout-rules.test.yaml');
const DASHBOARD = path.join(ROOT, 'deploy', 'grafana', 'cutout.json');
const SCALED_OBJECT = path.join(ROOT, 'deploy', 'keda', 'scaledobject.yaml');

const haveProm = fs.existsSync(PROMTOOL);
const promSkip = haveProm ? false : `promtool is not installed at ${PROMTOOL} (install it with: apt-get install -y --no-install-recommends prometheus)`;
if (!haveProm && process.env.CI === 'true') t.fail(`${promSkip}; CI must not skip it (.ci/run installs it)`);

const rules = parseAllDocuments(fs.readFileSync(RULES, 'utf8'))[0].toJS() as { groups: { name: string; rules: { alert?: string; expr: string }[] }[] };
const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
const scaledObject = parseAllDocuments(fs.readFileSync(SCALED_OBJECT, 'utf8'))[0].toJS();

/** Grafana's own variables, as Prometheus never sees them. */
const grafanaToPromql = (expr: string) => expr.replaceAll('$__rate_interval', '5m').replaceAll('$__interval', '1m');

const ruleExprs = rules.groups.flatMap((g) => g.rules.map((r) => ({ where: `rule ${r.alert}`, expr: r.expr })));
const dashboardExprs = dashboard.panels.flatMap((p) => p.targets.map((x) => ({ where: `panel "${p.title}"`, expr: grafanaToPromql(x.expr) })));
const kedaExprs = (scaledObject.spec.triggers as { type: string; metadata: { query?: string } }[])
  .filter((tr) => tr.type === 'prometheus').map((tr) => ({ where: 'ScaledObject', expr: tr.metadata.query! }));

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names of a PromQL expression: what is left once the strings, label matchers, ranges,
 * grouping clauses and function calls are taken out (enough for the expressions of deploy/, whose
 * validity promtool checks apart).
 */
export function metricNamesOf(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*(?!\s*\()(?![A-Za-z0-9_:])/g)) {
    if (!KEYWORDS.has(m[0].toLowerCase())) names.add(m[0]);
  }
  return [...names];
}

/** What /metrics exposes of cutout's own, by the tables. */
const exposed = new Set(METRIC_ROWS.flatMap((r) => (r.type === 'histogram' ? ['_bucket', '_sum', '_count'].map((s) => r.name + s) : [r.name])));

t.test('the name finder finds names and nothing else', async (t) => {
  t.same(metricNamesOf('histogram_quantile(0.95, sum by (le, route) (rate(a_bucket{route=~"/v1\\\\.0/.*"}[5m])))'), ['a_bucket']);
  t.same(metricNamesOf('max(x{kind="job"}) > 20 and max(deriv(y[10m])) > 0').sort(), ['x', 'y']);
  t.same(metricNamesOf('min by (instance) (a) == 0 or b == 0').sort(), ['a', 'b']);
});

t.test('every metric named by the dashboard, the rules and the ScaledObject is one the server exposes', async (t) => {
  const all = [...ruleExprs, ...dashboardExprs, ...kedaExprs];
  t.ok(ruleExprs.length >= 4 && dashboardExprs.length >= 10 && kedaExprs.length === 1, `${all.length} expressions`);
  for (const { where, expr } of all) {
    const names = metricNamesOf(expr);
    t.ok(names.length > 0, `${where}: names a metric`);
    for (const name of names) t.ok(exposed.has(name), `${where}: ${name} is exposed by /metrics`);
  }
  t.same(metricNamesOf(kedaExprs[0].expr), ['cutout_queue_depth'], 'KEDA scales on the queue depth');
});

t.test('the dashboard shows what the issue lists', async (t) => {
  const text = (pattern: RegExp) => dashboard.panels.some((p) => pattern.test(p.title) && p.targets.length > 0);
  for (const [what, pattern] of [
    ['requests by door', /^Requests by door$/], ['errors by door', /^Errors by door$/], ['latency', /Latency/],
    ['queue depth', /Queue depth/], ['workers busy', /Workers busy/], ['credits charged', /Credits charged/],
    ['job states', /Job states/], ['callback failures', /Callback/],
  ] as const) t.ok(text(pattern), `a panel for ${what}`);
  const uses = (name: string) => dashboardExprs.some((e) => metricNamesOf(e.expr).includes(name));
  for (const name of ['cutout_http_request_duration_seconds_count', 'cutout_http_request_duration_seconds_bucket', 'cutout_queue_depth', 'cutout_inference_slots', 'cutout_credits_charged_total', 'cutout_jobs', 'cutout_callback_deliveries_total']) {
    t.ok(uses(name), `the dashboard reads ${name}`);
  }
  const doors = dashboard.panels.find((p) => p.title === 'Requests by door')!.targets.length;
  t.equal(doors, 5, 'five doors: v1, remove.bg, rembg, Photoroom, Clipdrop');
  t.notOk(/https?:\/\//.test(JSON.stringify(dashboard)), 'no link or script from elsewhere in the dashboard');
});

t.test('the alert rules: the four the issue lists', async (t) => {
  t.same(ruleExprs.map((r) => r.where).sort(), ['rule CutoutCallbacksFailing', 'rule CutoutErrorRate', 'rule CutoutQueueGrowing', 'rule CutoutServerNotReady']);
});

t.test('promtool check rules passes', { skip: promSkip }, async (t) => {
  const out = execFileSync(PROMTOOL, ['check', 'rules', RULES], { encoding: 'utf8' });
  t.match(out, /SUCCESS: 4 rules found/);
});

t.test('promtool test rules: each alert fires when it should, and only then', { skip: promSkip }, async (t) => {
  const run = spawnSync(PROMTOOL, ['test', 'rules', RULE_TESTS], { encoding: 'utf8', cwd: path.dirname(RULE_TESTS) });
  t.equal(run.status, 0, `promtool test rules: ${run.stdout}${run.stderr}`);
  t.match(run.stdout, /SUCCESS/);
});

t.test('every dashboard and ScaledObject expression is valid PromQL (checked by promtool as recording rules)', { skip: promSkip }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-promql-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'exprs.yaml');
  const exprs = [...dashboardExprs, ...kedaExprs];
  fs.writeFileSync(file, stringify({ groups: [{ name: 'exprs', rules: exprs.map((e, i) => ({ record: `check:expr_${i}`, expr: e.expr })) }] }));
  const run = spawnSync(PROMTOOL, ['check', 'rules', file], { encoding: 'utf8' });
  t.equal(run.status, 0, `promtool: ${run.stdout}${run.stderr}`);
  t.match(run.stdout, new RegExp(`SUCCESS: ${exprs.length} rules found`));
  // And it does refuse a broken one (an escape PromQL does not know).
  fs.writeFileSync(file, stringify({ groups: [{ name: 'bad', rules: [{ record: 'check:bad', expr: 'sum(rate(x{route=~"/v1\\.0"}[5m]))' }] }] }));
  t.not(spawnSync(PROMTOOL, ['check', 'rules', file]).status, 0, 'a broken expression fails');
});
