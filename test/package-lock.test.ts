/**
 * package-lock.json's root entry agrees with package.json, field for field, so that `npm install`
 * on a fresh clone leaves the tracked lock unchanged (issue 29: a `"hasInstallScript": true` that
 * npm added was missing from the committed lock). The entry is derived as npm 7+ writes it
 * (@npmcli/arborist, Shrinkwrap.metaFromNode): the package's own metadata fields, name, the
 * devDependencies of the top package, and hasInstallScript when the package has a preinstall,
 * install or postinstall script (or a binding.gyp, for which npm adds `node-gyp rebuild`).
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/cli.js';

type Json = Record<string, any>;

const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Json;
const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as Json;

/** The fields arborist copies from a package.json into its lock entry (pkgMetaKeys). */
const META_KEYS = [
  'version', 'dependencies', 'peerDependencies', 'peerDependenciesMeta', 'optionalDependencies',
  'bundleDependencies', 'acceptDependencies', 'funding', 'engines', 'os', 'cpu', 'libc', 'license',
  'bin', 'deprecated', 'workspaces',
];

/** npm reads `bin: "file"` as `{ <name>: "file" }`. */
function normalizedBin(p: Json): unknown {
  return typeof p.bin === 'string' ? { [p.name]: p.bin } : p.bin;
}

/** Whether npm runs an install-time script for the package itself (Node.hasInstallScript). */
function hasInstallScript(p: Json, dir: string): boolean {
  const s = (p.scripts ?? {}) as Json;
  const gyp = p.gypfile !== false && !s.install && !s.preinstall && fs.existsSync(path.join(dir, 'binding.gyp'));
  return Boolean(p.hasInstallScript || s.preinstall || s.install || s.postinstall || gyp);
}

/** The root entry (`packages[""]`) npm writes for this package.json. */
function expectedRootEntry(p: Json, dir: string): Json {
  const entry: Json = {};
  for (const key of META_KEYS) {
    let value = key === 'bin' ? normalizedBin(p) : p[key];
    if (key === 'license' && value && typeof value === 'object' && value.type) value = value.type;
    // falsy values and empty objects are left out
    if (!value || (typeof value === 'object' && Object.keys(value).length === 0)) continue;
    entry[key] = value;
  }
  entry.name = p.name;
  if (p.devDependencies && Object.keys(p.devDependencies).length) entry.devDependencies = p.devDependencies;
  if (hasInstallScript(p, dir)) entry.hasInstallScript = true;
  return entry;
}

t.test('the lock names this package and this version', async (t) => {
  t.equal(lock.name, pkg.name);
  t.equal(lock.version, pkg.version);
  t.ok(lock.lockfileVersion >= 2, 'a lock with a packages section (npm 7+)');
});

t.test('the lock\'s root entry is what npm install writes for package.json', async (t) => {
  const root = lock.packages?.[''] as Json;
  t.ok(root, 'packages[""] exists');
  t.same(root, expectedRootEntry(pkg, ROOT), 'field for field, nothing more and nothing less');
  // The field that drifted: package.json has a postinstall script, so npm marks the root.
  t.equal(root.hasInstallScript === true, hasInstallScript(pkg, ROOT), 'hasInstallScript exactly when package.json has an install-time script');
});

t.test('the derivation follows npm\'s rule for hasInstallScript', async (t) => {
  const none = path.join(ROOT, 'test', 'fixtures'); // no binding.gyp there
  t.equal(hasInstallScript({ scripts: { build: 'tsc', prepare: 'x', test: 'tap' } }, none), false, 'prepare, build and test are not install scripts');
  for (const script of ['preinstall', 'install', 'postinstall']) {
    t.equal(hasInstallScript({ scripts: { [script]: 'node x.js' } }, none), true, script);
  }
  t.same(expectedRootEntry({ name: 'x', version: '1.0.0', bin: 'cli.js', dependencies: {}, license: { type: 'MIT' } }, none),
    { name: 'x', version: '1.0.0', bin: { x: 'cli.js' }, license: 'MIT' }, 'empty objects dropped, bin and licence normalised');
});

t.test('every dependency of package.json has its entry in the lock', async (t) => {
  const all = { ...pkg.dependencies, ...pkg.devDependencies } as Record<string, string>;
  for (const name of Object.keys(all)) {
    const entry = lock.packages?.[`node_modules/${name}`] as Json | undefined;
    t.ok(entry?.version, `${name} is in the lock`);
  }
});
