import t from 'tap';
import { redactUrl } from '../../src/store/url.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULTS, loadConfig } from '../../src/config.js';

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

t.test('cutout remove\'s output defaults in the file: checked, out resolved from the file\'s folder, flags win', async (t) => {
  const { withRemoveDefaults } = await import('../../src/config.js');
  const file = configFile(t, { format: 'webp', bgColor: '#fff', size: 'preview', crop: true, mask: false, alpha: 'hard', refine: false, decontaminate: false, recursive: true, skipExisting: true, out: 'cutouts' });
  const c = await loadConfig({}, { configFile: file, env: {} });
  t.same(c.remove, { format: 'webp', bgColor: '#fff', size: 'preview', crop: true, mask: false, alpha: 'hard', refine: false, decontaminate: false, recursive: true, skipExisting: true, out: path.join(path.dirname(file), 'cutouts') });
  t.ok(Object.isFrozen(c.remove));
  t.same((await loadConfig({}, { env: {} })).remove, {}, 'none without a file');

  // commander gives refine: true when --no-refine is absent: that is no flag given.
  const none = withRemoveDefaults({ refine: true, decontaminate: true }, c.remove);
  t.match(none, { format: 'webp', bgColor: '#fff', refine: false, decontaminate: false, skipExisting: true, out: c.remove.out });
  const flagged = withRemoveDefaults({ format: 'jpg', bgColor: 'transparent', refine: false, decontaminate: true, overwrite: true, out: 'x' }, c.remove);
  t.match(flagged, { format: 'jpg', bgColor: 'transparent', refine: false, decontaminate: false, overwrite: true, out: 'x' });
  t.equal(flagged.skipExisting, undefined, '--overwrite sets aside the file\'s skipExisting');
  t.equal(withRemoveDefaults({ out: 'one.png' }, c.remove).format, undefined, '--out FILE.png gives the format by its extension');

  await t.rejects(loadConfig({}, { configFile: configFile(t, { format: 'tiff' }), env: {} }), /Expected one of png, webp, jpg, gif, auto, zip for format but received "tiff" in .*\.cutoutrc\.json/);
  await t.rejects(loadConfig({}, { configFile: configFile(t, { bgColor: 'notacolour' }), env: {} }), /a hex colour such as #ffffff, 0f0 or 81d4fa77, or a CSS colour name for bgColor/);
  await t.rejects(loadConfig({}, { configFile: configFile(t, { crop: 'yes' }), env: {} }), /true or false for crop/);
  await t.rejects(loadConfig({}, { configFile: configFile(t, { skipExisting: true, overwrite: true }), env: {} }), /skipExisting and overwrite cannot both be true/);
  await t.rejects(loadConfig({}, { configFile: configFile(t, { key: 'sk_x' }), env: {} }), /Unknown setting "key"/, 'a key is a secret, not a project setting');
});

t.test('a syntax error says what and where: file, line, column', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-config-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const json = path.join(dir, '.cutoutrc.json');
  fs.writeFileSync(json, '{\n  "format": "webp",\n  "crop": true,\n}\n');
  await t.rejects(loadConfig({}, { configFile: json, env: {} }), {
    message: `Cannot read config file ${json}: Expected double-quoted property name at line 4, column 1 (a trailing comma before it?)`,
  });
  const yaml = path.join(dir, '.cutoutrc');
  fs.writeFileSync(yaml, 'format: webp\n  crop: [\n');
  await t.rejects(loadConfig({}, { configFile: yaml, env: {} }), /Cannot read config file .*\.cutoutrc: bad indentation of a mapping entry at line 2, column \d+$/);
});

t.test('through the CLI: the file\'s defaults apply from a subfolder, a flag overrides them', async (t) => {
  const { runCli, FIXTURES } = await import('../helpers/cli.js');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-config-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(path.join(dir, 'photos'));
  fs.copyFileSync(path.join(FIXTURES, 'coffee.jpg'), path.join(dir, 'photos', 'coffee.jpg'));
  fs.writeFileSync(path.join(dir, '.cutoutrc.json'), JSON.stringify({ format: 'webp', bgColor: '#ffffff', size: 'preview', quality: 'fast', out: 'cutouts' }));
  const env = { CUTOUT_HOME: path.join(dir, 'home'), HOME: dir };
  const cwd = path.join(dir, 'photos');
  const [fromFile, overridden] = await Promise.all([
    runCli(['coffee.jpg', '--json', '--no-progress'], { cwd, env }),
    runCli(['coffee.jpg', '--json', '--no-progress', '--format', 'jpg', '--out', 'here'], { cwd, env }),
  ]);
  t.equal(fromFile.code, 0, fromFile.stderr);
  t.equal(JSON.parse(fromFile.stdout.toString()).output, path.join(dir, 'cutouts', 'coffee.cutout.webp'), 'webp, in the file\'s out folder');
  t.equal(overridden.code, 0, overridden.stderr);
  t.equal(JSON.parse(overridden.stdout.toString()).output, path.join('here', 'coffee.cutout.jpg'), 'the flags win');
  const sharp = (await import('sharp')).default;
  const meta = await sharp(path.join(dir, 'cutouts', 'coffee.cutout.webp')).metadata();
  t.equal(meta.hasAlpha, false, 'bgColor #ffffff: an opaque background');
});
