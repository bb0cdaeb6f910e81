/**
 * What a folder scan and a glob pick up (src/commands/inputs.ts), on real directories: image
 * extensions in any case (.jfif and .jpe too), symlinked files but not symlinked directories,
 * never our own outputs, and arguments that match nothing.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { expandInputs, type ExpandedInputs } from '../../src/commands/inputs.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

function tree(t: Tap.Test | any): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-inputs-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const f of ['a.JPG', 'b.jfif', 'c.jpe', 'd.png', 'notes.txt', 'a.cutout.png', 'd.mask.png', 'sub/e.webp', 'elsewhere/f.jpg']) {
    fs.mkdirSync(path.dirname(path.join(dir, 'photos', f)), { recursive: true });
    fs.writeFileSync(path.join(dir, 'photos', f), 'x');
  }
  fs.symlinkSync(path.join(dir, 'photos', 'elsewhere', 'f.jpg'), path.join(dir, 'photos', 'linked.jpg'));
  fs.symlinkSync(path.join(dir, 'photos', 'missing.jpg'), path.join(dir, 'photos', 'dangling.jpg'));
  fs.symlinkSync(path.join(dir, 'photos'), path.join(dir, 'photos', 'sub', 'loop'));
  return dir;
}

const names = (items: { path: string }[], dir: string) => items.map((i) => path.relative(dir, i.path));

t.test('a folder scan takes image extensions in any case, and symlinked files', async (t) => {
  const dir = tree(t);
  const flat = await expandInputs([path.join(dir, 'photos')], { recursive: false });
  t.same(names(flat.items, dir), ['photos/a.JPG', 'photos/b.jfif', 'photos/c.jpe', 'photos/d.png', 'photos/linked.jpg']);
  t.same(flat.unmatched, []);
});

t.test('a recursive scan does not follow a symlinked directory (no loop), and skips our outputs', async (t) => {
  const dir = tree(t);
  const deep = await expandInputs([path.join(dir, 'photos')], { recursive: true });
  // linked.jpg is elsewhere/f.jpg: one file, taken once, under the first path that reaches it.
  t.same(names(deep.items, dir), ['photos/a.JPG', 'photos/b.jfif', 'photos/c.jpe', 'photos/d.png', 'photos/elsewhere/f.jpg', 'photos/sub/e.webp']);
  t.ok(deep.items.every((i) => !/\.(cutout|mask)\./.test(i.path)));
});

t.test('a glob through a symlink to a parent folder takes each file once', async (t) => {
  const dir = tree(t);
  const r = await expandInputs([path.join(dir, 'photos', '**', '*.webp')], { recursive: false });
  t.same(names(r.items, dir), ['photos/sub/e.webp'], 'not again as photos/sub/loop/sub/e.webp');
});

/**
 * Root reads every folder, so as root (CI containers) the scan runs in a child process as the
 * unprivileged user 65534 (setpriv, util-linux), on a copy of the built dist/ that npm install
 * makes (the repository itself may sit where that user cannot read; inputs.js imports only
 * node: modules and its neighbours), without the test runner's NODE_OPTIONS hooks.
 */
const asRoot = process.getuid?.() === 0;
const hasSetpriv = spawnSync('setpriv', ['--version']).status === 0;

t.test('an unreadable sub-folder fails on its own; the rest of the scan goes on', { skip: asRoot && !hasSetpriv && 'root, and no setpriv to drop privileges' }, async (t) => {
  const dir = tree(t);
  fs.chmodSync(dir, 0o755);
  fs.chmodSync(path.join(dir, 'photos', 'sub'), 0);
  t.teardown(() => fs.chmodSync(path.join(dir, 'photos', 'sub'), 0o755));
  let r: ExpandedInputs;
  if (asRoot) {
    const dist = path.join(dir, 'dist');
    fs.cpSync(path.join(ROOT, 'dist'), dist, { recursive: true });
    fs.writeFileSync(path.join(dist, 'package.json'), '{"type":"module"}');
    const script = `import { expandInputs } from ${JSON.stringify(path.join(dist, 'commands', 'inputs.js'))};
      process.stdout.write(JSON.stringify(await expandInputs([${JSON.stringify(path.join(dir, 'photos'))}], { recursive: true })));`;
    // `env -u`: the test runner puts its hooks back into any child's NODE_OPTIONS.
    const child = spawnSync(
      'setpriv',
      ['--reuid=65534', '--regid=65534', '--clear-groups', 'env', '-u', 'NODE_OPTIONS', process.execPath, '--input-type=module', '-e', script],
      { encoding: 'utf8', cwd: dir },
    );
    t.equal(child.status, 0, child.stderr);
    r = JSON.parse(child.stdout) as ExpandedInputs;
  } else {
    r = await expandInputs([path.join(dir, 'photos')], { recursive: true });
  }
  t.same(r.unreadable, [{ path: path.join(dir, 'photos', 'sub'), message: 'Cannot read folder: permission denied' }]);
  t.equal(r.items.length, 5, 'the readable images are all still taken');
  t.same(r.unmatched, []);
});

t.test('a glob and a folder with nothing to take are reported as unmatched', async (t) => {
  const dir = tree(t);
  const empty = path.join(dir, 'empty');
  fs.mkdirSync(empty);
  const r = await expandInputs([path.join(dir, 'photos', '*.gif'), empty, path.join(dir, 'photos', '*.jfif')], { recursive: false });
  t.same(r.unmatched, [path.join(dir, 'photos', '*.gif'), empty]);
  t.same(names(r.items, dir), ['photos/b.jfif']);
});

t.test('--exclude globs and watched globs: *, **, ?, [..], {a,b}; a glob without / matches any name in the path', async (t) => {
  const { excludeMatcher, matchesGlob } = await import('../../src/commands/glob-match.js');
  t.ok(matchesGlob('photos/a.jpg', 'photos/*.jpg'));
  t.notOk(matchesGlob('photos/sub/a.jpg', 'photos/*.jpg'), '* stays in its folder');
  t.ok(matchesGlob('photos/sub/deep/a.jpg', 'photos/**/*.jpg'));
  t.ok(matchesGlob('photos/a.jpg', 'photos/**/*.jpg'), '**/ matches no folder too');
  t.ok(matchesGlob('./photos/a1.png', 'photos/a?.{png,jpg}'));
  t.ok(matchesGlob('photos/b.jpg', 'photos/[abc].jpg'));
  t.notOk(matchesGlob('photos/d.jpg', 'photos/[!d].jpg'));
  t.notOk(matchesGlob('photos/a+b.jpg', 'photos/a.b.jpg'), 'a dot is a dot');
  const excluded = excludeMatcher(['raw', '*.png', 'shop/old/**']);
  t.ok(excluded('photos/raw/a.jpg'), 'a folder name at any depth');
  t.ok(excluded('photos/x.png'));
  t.ok(excluded('shop/old/2019/a.jpg'));
  t.notOk(excluded('shop/new/a.jpg'));
  t.notOk(excluded('photos/rawhide.jpg'), 'a whole name, not a part');
  t.notOk(excludeMatcher([])('anything.jpg'));
});
