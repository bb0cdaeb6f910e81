/**
 * The settings table (src/settings.ts): every serve and model-server flag has an environment
 * variable named by the contract's rule, every secret a `_FILE` form, and the loader, --help and
 * docs/deploy.md read the same rows (cli-contract "Settings from the environment").
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import t from 'tap';
import { DEFAULTS, loadConfig, REMOVE_DEFAULT_KEYS } from '../../src/config.js';
import { COMMANDS, FILE_KEYS, flagAttribute, rowsOf, SETTINGS, settingsOf } from '../../src/settings.js';
import { BIN } from '../helpers/cli.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
// The names cli-contract.md listed before the rule, kept as they were.
const CONTRACT_NAMES: Record<string, string> = {
  dataDir: 'CUTOUT_HOME',
  modelServerHost: 'CUTOUT_MODEL_SERVER_HOST',
  modelServerPort: 'CUTOUT_MODEL_SERVER_PORT',
  modelServerToken: 'CUTOUT_MODEL_SERVER_TOKEN',
};
const SECRETS = ['CUTOUT_STORE', 'CUTOUT_CALLBACK_SECRET', 'CUTOUT_MARKETPLACE_SECRET', 'CUTOUT_UPSTREAM_TOKEN', 'CUTOUT_MODEL_SERVER_TOKEN', 'CUTOUT_ADMIN_TOKEN'];

/** An empty environment and no config file found: only what a test sets counts. */
const isolated = (env: Record<string, string>) => loadConfig({}, { env: { HOME: os.tmpdir(), ...env }, configFile: undefined });

t.test('every field of the configuration is one row, and every row a field', async (t) => {
  t.same(rowsOf('config').map((r) => r.key).sort(), Object.keys(DEFAULTS).filter((k) => k !== 'remove').sort());
  t.equal(new Set(SETTINGS.map((r) => r.env).filter(Boolean)).size, SETTINGS.filter((r) => r.env).length, 'no variable names two settings');
  t.equal(new Set(SETTINGS.map((r) => r.key)).size, SETTINGS.length, 'no key names two rows');
  t.same(rowsOf('process').map((r) => r.env).sort(), ['CUTOUT_ARENA', 'CUTOUT_HUGEPAGES', 'CUTOUT_ORT_CACHE', 'CUTOUT_THREADS'], 'the variables read where they act are rows too');
});

t.test('the config file\'s keys are one list: the settings and remove\'s defaults, named in the message of an unknown key', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-keys-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, '.cutoutrc.json');
  fs.writeFileSync(file, JSON.stringify({ colour: 'red' }));
  const err = await loadConfig({}, { configFile: file, env: {} }).then(() => null, (e: Error) => e);
  const known = /known: (.*)$/.exec(err?.message ?? '')?.[1]?.split(', ');
  t.same(known, [...FILE_KEYS], 'the message lists the file\'s keys');
  for (const row of SETTINGS) t.equal(FILE_KEYS.includes(row.key), row.scope !== 'process' && row.key !== 'configFile', `${row.key}: ${row.scope}`);
  t.same(REMOVE_DEFAULT_KEYS, rowsOf('remove').map((r) => r.key));
});

t.test('every command registers its setting flags from the table', async (t) => {
  const { buildProgram } = await import('../../src/program.js');
  const program = buildProgram();
  for (const which of COMMANDS) {
    const command = program.commands.find((c) => c.name() === which)!;
    t.ok(command, which);
    // A command with subcommands (keys create, models list) gives its flags to each of them.
    const targets = command.commands.length ? command.commands : [command];
    for (const target of targets) {
      const flags = target.options.map((o) => o.flags);
      for (const row of settingsOf(which)) t.ok(flags.includes(row.flag), `${which} ${target.name()}: ${row.flag}`);
    }
  }
  t.same(settingsOf('health').map((r) => r.flag), ['--data <dir>', '--config <file>'], 'every command takes --data and --config (cli-contract)');
  t.equal(flagAttribute('-o, --out <path>'), 'out', 'a short flag before the long one');
});

t.test('every serve and model-server flag has its variable: CUTOUT_ + the flag in upper snake case, or the name the contract kept', async (t) => {
  for (const command of ['serve', 'model-server'] as const) {
    const rows = settingsOf(command);
    t.ok(rows.length > 5, `${command}: ${rows.length} flags from the table`);
    for (const row of rows) {
      const expected = CONTRACT_NAMES[row.key] ?? `CUTOUT_${flagAttribute(row.flag).replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
      t.equal(row.env, expected, `${command} ${row.flag}`);
    }
  }
  t.same(SETTINGS.filter((r) => r.secret).map((r) => r.env).sort(), [...SECRETS].sort(), 'the secrets of the contract are the rows marked secret');
});

t.test('--help of serve and model-server lists each flag of the table with its variable', async (t) => {
  for (const command of ['serve', 'model-server'] as const) {
    const r = spawnSync(process.execPath, [BIN, command, '--help'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', COLUMNS: '400' } });
    t.equal(r.status, 0);
    // Each option's entry, its wrapped lines joined: an entry starts with two spaces and a dash.
    const entries = r.stdout.split(/\n(?= {2}-)/).map((e) => e.replace(/\s+/g, ' ').trim());
    for (const row of settingsOf(command)) {
      const entry = entries.find((e) => e.startsWith(row.flag + ' ') || e === row.flag);
      t.ok(entry?.includes(`env ${row.env}`), `${command} ${row.flag}: ${row.env} in its help`);
    }
  }
});

t.test('settings from the environment, with the precedence flag > environment > file > default', async (t) => {
  const c = await isolated({ CUTOUT_RATE_LIMIT: '7', CUTOUT_PLAYGROUND: 'false', CUTOUT_PRELOAD: 'true', CUTOUT_LEASE_MS: '45000', CUTOUT_WORKERS: '3' });
  t.equal(c.rateLimit, 7);
  t.equal(c.playground, false, 'a negated flag is named by its setting: CUTOUT_PLAYGROUND=false');
  t.equal(c.preload, true);
  t.equal(c.leaseMs, 45000);
  t.equal(c.workers, 3);
  const flagged = await loadConfig({ rateLimit: '9' }, { env: { HOME: os.tmpdir(), CUTOUT_RATE_LIMIT: '7' } });
  t.equal(flagged.rateLimit, 9, 'a flag beats the environment');
  await t.rejects(isolated({ CUTOUT_RATE_LIMIT: 'lots' }), /Expected an integer from 1 to 1000000 for rateLimit but received "lots"/, 'a bad value names the setting');
});

t.test('a secret from <VAR>_FILE: the trailing newline dropped, never both, a missing file named without its content', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-secret-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'token');
  fs.writeFileSync(file, 's3cr3t-token\n');
  t.equal((await isolated({ CUTOUT_UPSTREAM_TOKEN_FILE: file })).upstreamToken, 's3cr3t-token');
  t.equal((await isolated({ CUTOUT_MARKETPLACE_SECRET_FILE: file })).marketplaceSecret, 's3cr3t-token');
  fs.writeFileSync(file, 'postgres://cutout:pw@db:5432/cutout\n');
  t.equal((await isolated({ CUTOUT_STORE_FILE: file })).store, 'postgres://cutout:pw@db:5432/cutout', 'the store URL with its password');
  await t.rejects(isolated({ CUTOUT_STORE_FILE: file, CUTOUT_STORE: 'postgres://x@y/z' }), /Both CUTOUT_STORE and CUTOUT_STORE_FILE are set/);
  await t.rejects(isolated({ CUTOUT_CALLBACK_SECRET_FILE: path.join(dir, 'missing') }), /Cannot read CUTOUT_CALLBACK_SECRET_FILE .*missing: ENOENT/);
  t.equal((await isolated({ CUTOUT_RATE_LIMIT_FILE: file })).rateLimit, DEFAULTS.rateLimit, 'a setting that is not a secret has no _FILE form');
});

t.test('docs/deploy.md lists every variable of the table, and each secret with its _FILE form', async (t) => {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'deploy.md'), 'utf8');
  for (const row of SETTINGS) {
    if (!row.env) continue;
    t.match(doc, new RegExp(`\`${row.env}\``), row.env);
    if (row.secret) t.match(doc, new RegExp(`\`${row.env}_FILE\``), `${row.env}_FILE`);
  }
});

t.test('docs/deploy.md holds the table that the settings give (else npm run docs:settings)', async (t) => {
  const { settingsMarkdown, withSettingsTable } = await import('../../src/settings-doc.js');
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'deploy.md'), 'utf8');
  t.equal(withSettingsTable(doc, settingsMarkdown()), doc, 'the table between the markers is current');
});
