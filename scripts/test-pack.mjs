#!/usr/bin/env node
/**
 * The packaging check (`npm run test:pack`; .ci/run runs it after `npm test`): packs this checkout,
 * installs the tarball globally into an empty temporary prefix as a user would, with the npm
 * registry as the only network (ONNXRUNTIME_NODE_INSTALL=skip, which onnxruntime-node documents for
 * skipping its optional CUDA download), then runs the installed `cutout` from another folder on a
 * fixture and checks that the output has an alpha channel with both transparent and opaque pixels,
 * and that `cutout --version` is this package's version. Exits 1 on any failure.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-pack-'));
const prefix = path.join(tmp, 'prefix');
const work = path.join(tmp, 'elsewhere');
fs.mkdirSync(work);

function run(cmd, args, opts = {}) {
  const started = performance.now();
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  const seconds = (performance.now() - started) / 1000;
  if (r.status !== 0) {
    process.stderr.write(`test:pack: ${cmd} ${args.join(' ')} exited ${r.status}\n${r.stdout ?? ''}${r.stderr ?? ''}\n`);
    fs.rmSync(tmp, { recursive: true, force: true });
    process.exit(1);
  }
  return { ...r, seconds };
}

function check(ok, what) {
  process.stdout.write(`${ok ? 'ok  ' : 'FAIL'} ${what}\n`);
  if (!ok) process.exitCode = 1;
}

try {
  // --ignore-scripts: the checkout is already built and prepared (npm install ran prepare).
  const packed = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: root });
  const info = JSON.parse(packed.stdout)[0];
  const tarball = path.join(tmp, info.filename);
  process.stdout.write(`tarball: ${info.filename}, ${(info.size / 1024).toFixed(0)} KiB packed, ${(info.unpackedSize / 1024).toFixed(0)} KiB unpacked, ${info.entryCount} files\n`);

  const env = { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' };
  const install = run('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', tarball], { cwd: work, env });
  process.stdout.write(`global install: ${install.seconds.toFixed(1)} s (npm install -g --prefix ${prefix} ${info.filename})\n`);

  const bin = path.join(prefix, 'bin', 'cutout');
  fs.copyFileSync(path.join(root, 'test', 'fixtures', 'astronaut.jpg'), path.join(work, 'photo.jpg'));
  const home = path.join(tmp, 'home');
  const first = run(bin, ['photo.jpg'], { cwd: work, env: { ...process.env, CUTOUT_HOME: home } });
  process.stdout.write(`first run: ${first.seconds.toFixed(1)} s; it printed:\n${(first.stdout + first.stderr).trim().replace(/^/gm, '  | ')}\n`);

  check(!/preparing model/.test(first.stderr), 'the install prepared the model (the first run did not have to)');
  const out = path.join(work, 'photo.cutout.png');
  check(fs.existsSync(out), 'the installed cutout wrote photo.cutout.png in another folder');
  if (fs.existsSync(out)) {
    const { data, info: meta } = await sharp(out).raw().toBuffer({ resolveWithObject: true });
    let clear = 0;
    let solid = 0;
    for (let i = meta.channels - 1; i < data.length; i += meta.channels) {
      if (data[i] < 16) clear++;
      else if (data[i] > 240) solid++;
    }
    const pixels = meta.width * meta.height;
    check(meta.channels === 4, `the output has an alpha channel (${meta.channels} channels)`);
    check(clear > pixels * 0.1 && solid > pixels * 0.1, `its alpha has a background and a subject (${clear} transparent, ${solid} opaque of ${pixels} pixels)`);
  }
  const shown = run(bin, ['--version'], { cwd: work }).stdout.trim();
  check(shown === version, `cutout --version prints ${version} (${shown})`);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
if (process.exitCode) process.stderr.write('test:pack: the installed package failed a check\n');
else process.stdout.write('test:pack: the packed package installs and runs\n');
