/**
 * First use without a prepared model: an installed copy of the package whose models/cache is empty
 * (its postinstall did not run, or the cache was cleared). The first `cutout photo.jpg` must build
 * the model from the installed data package, say so in one line, download nothing, and still write
 * the cutout; the second run must not prepare again, and loads onnxruntime's optimised copy.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { alphaAt, FIXTURES, ROOT } from '../helpers/cli.js';

t.test('a package with an empty model cache prepares the model at first use, once', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-first-use-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The installed package's shape: bin, dist, the manifests and package.json, with no models/cache.
  const pkg = path.join(dir, 'pkg');
  fs.mkdirSync(path.join(pkg, 'models'), { recursive: true });
  for (const part of ['bin', 'dist', 'package.json']) fs.cpSync(path.join(ROOT, part), path.join(pkg, part), { recursive: true });
  for (const f of fs.readdirSync(path.join(ROOT, 'models')).filter((f) => f.endsWith('.json'))) {
    fs.copyFileSync(path.join(ROOT, 'models', f), path.join(pkg, 'models', f));
  }
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
  fs.copyFileSync(path.join(FIXTURES, 'astronaut.jpg'), path.join(dir, 'photo.jpg'));

  const env = { ...process.env, CUTOUT_HOME: path.join(dir, 'home') };
  const run = () => spawnSync(process.execPath, [path.join(pkg, 'bin', 'cutout'), 'photo.jpg', '--overwrite'], { cwd: dir, env, encoding: 'utf8' });

  const first = run();
  t.equal(first.status, 0, first.stderr);
  const lines = first.stderr.split('\n').filter((l) => /preparing model/.test(l));
  t.equal(lines.length, 1, 'one line says that the model is being prepared');
  t.match(lines[0], /preparing model isnet-medium for its first use.*nothing is downloaded/);
  t.ok(fs.readdirSync(path.join(pkg, 'models', 'cache')).some((f) => f.endsWith('.fp16-to-fp32.onnx')), 'the fp32 copy is in the package cache');
  const [corner, chest] = await alphaAt(path.join(dir, 'photo.cutout.png'), [[3, 3], [180, 400]]);
  t.ok(corner < 16 && chest > 240, `the cutout is right (corner ${corner}, subject ${chest})`);

  // onnxruntime's optimised copy of the model that ran: a folder, the weights apart (mapped at load).
  const cache = path.join(pkg, 'models', 'cache');
  const optimized = fs.readdirSync(cache).filter((f) => f.endsWith('.optimized'));
  t.equal(optimized.length, 1, `one optimised copy (${optimized.join(', ')})`);
  t.ok(fs.statSync(path.join(cache, optimized[0], 'model.onnx')).size < 2e6, 'its graph is small');
  t.ok(fs.statSync(path.join(cache, optimized[0], 'weights.data')).size > 40e6, 'its weights are a file of their own');
  const firstCutout = fs.readFileSync(path.join(dir, 'photo.cutout.png'));
  const copyMade = fs.statSync(path.join(cache, optimized[0], 'weights.data'));

  const second = run();
  t.equal(second.status, 0, second.stderr);
  t.notMatch(second.stderr, /preparing model/, 'the second run finds the prepared model');
  const copyRead = fs.statSync(path.join(cache, optimized[0], 'weights.data'));
  t.ok(copyRead.ino === copyMade.ino && copyRead.mtimeMs === copyMade.mtimeMs, 'the copy was loaded, not made again');
  t.ok(firstCutout.equals(fs.readFileSync(path.join(dir, 'photo.cutout.png'))), 'the session from the optimised copy gives the same cutout');
});
