import t from 'tap';
import { redactUrl } from '../src/store/url.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULTS, loadConfig } from '../src/config.js';

function configFile(t: any, content: object): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-config-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, '.cutoutrc.json');
  fs.writeFileSync(file, JSON.stringify(content));
  return file;
}

t.test('flag > environment > file > default, validated and frozen', async (t) => {
  const file = configFile(t, { port: 9000, quality: 'balanced', concurrency: 3, workers: 2 });
  const env = { CUTOUT_PORT: '9100', CUTOUT_QUALITY: 'fast' };
  const c = await loadConfig({ port: '9200' }, { configFile: file, env });
  t.equal(c.port, 9200, 'flag wins');
  t.equal(c.quality, 'fast', 'environment beats the file');
  t.equal(c.concurrency, 3, 'file beats the default');
  t.equal(c.rateLimit, DEFAULTS.rateLimit, 'default');
  t.ok(Object.isFrozen(c));
  const fromEnvOnly = await loadConfig({}, { configFile: file, env: {} });
  t.equal(fromEnvOnly.port, 9000);
  t.equal(fromEnvOnly.quality, 'balanced');
});

t.test('bad values and unknown keys are refused with a clear message', async (t) => {
  await t.rejects(loadConfig({ port: 'eighty' }, { env: {} }), /Expected an integer from 0 to 65535 for port but received "eighty"/);
  await t.rejects(loadConfig({ quality: 'turbo' }, { env: {} }), /Expected one of fast, balanced, best, max for quality/);
  const typo = configFile(t, { prot: 80 });
  await t.rejects(loadConfig({}, { configFile: typo, env: {} }), /Unknown setting "prot"/);
});

t.test('store and leaseMs: --store > CUTOUT_STORE > "store" in the file; SQLite and 30 s by default', async (t) => {
  t.equal((await loadConfig({}, { env: {} })).store, null, 'SQLite in the data directory by default');
  t.equal((await loadConfig({}, { env: {} })).leaseMs, 30_000);
  const file = configFile(t, { store: 'postgres://file@db/cutout', leaseMs: 5000 });
  t.equal((await loadConfig({}, { configFile: file, env: {} })).store, 'postgres://file@db/cutout');
  t.equal((await loadConfig({}, { configFile: file, env: { CUTOUT_STORE: 'postgresql://env@db/cutout' } })).store, 'postgresql://env@db/cutout');
  const flagged = await loadConfig({ store: 'postgres://flag@db/cutout', leaseMs: '1500' }, { configFile: file, env: { CUTOUT_STORE: 'postgresql://env@db/cutout' } });
  t.same([flagged.store, flagged.leaseMs], ['postgres://flag@db/cutout', 1500]);
  await t.rejects(loadConfig({ store: 'mysql://u:pw@db/x' }, { env: {} }), { message: 'Expected a postgres:// or postgresql:// URL for store but received "mysql://u:***@db/x"' });
  // Without `//` there is no URL host to parse: the password is masked all the same.
  await t.rejects(loadConfig({ store: 'postgres:/u:pw@h/db' }, { env: {} }), { message: 'Expected a postgres:// or postgresql:// URL for store but received "postgres:/u:***@h/db"' });
  const odd = await loadConfig({ store: 'postgres:s3cret@h/db' }, { env: {} }).catch((err: Error) => err);
  t.notMatch((odd as Error).message, /s3cret/, 'nor when the scheme\'s colon is all there is');
  await t.rejects(loadConfig({ leaseMs: '10' }, { env: {} }), /Expected an integer from 1000 to 3600000 for leaseMs/);
  await t.rejects(loadConfig({ leaseMs: '999' }, { env: {} }), /Expected an integer from 1000 to 3600000 for leaseMs/, 'under a second a slow renewal loses running jobs');
  t.equal((await loadConfig({ leaseMs: '1000' }, { env: {} })).leaseMs, 1000);
});

t.test('redactUrl: the password is never shown, URL or not', async (t) => {
  const cases: [string, string][] = [
    ['postgres://u:pw@h:5432/db', 'postgres://u:***@h:5432/db'],
    ['postgresql://u@h/db', 'postgresql://u@h/db'],
    ['postgres://h/db', 'postgres://h/db'],
    ['postgres://u:p@ss@h/db', 'postgres://u:***@h/db'],
    ['postgres:/u:pw@h/db', 'postgres:/u:***@h/db'],
    ['postgres:u:pw@h/db', 'postgres:u:***@h/db'],
    ['u:pw@h/db', 'u:***@h/db'],
    ['postgres:user@h', 'postgres:***@h'],
    ['not a url', 'not a url'],
  ];
  for (const [url, shown] of cases) t.equal(redactUrl(url), shown, url);
});
