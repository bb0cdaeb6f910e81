#!/usr/bin/env node
/**
 * The packaging check (`npm run test:pack`; .ci/run runs it after `npm test`): packs this checkout
 * and installs the tarball as the README and docs/library.md say, with the npm registry as the only
 * network (ONNXRUNTIME_NODE_INSTALL=skip, the variable onnxruntime-node's install script reads to
 * skip its CUDA download from NuGet): globally into an empty temporary prefix, then runs the
 * installed `cutout` from another folder on a fixture; and into a fresh consumer project, then
 * runs the library from it. Checks that each output has an alpha channel with both transparent and
 * opaque pixels, that `cutout --version` is this package's version, and that no CUDA provider was
 * installed. Prints each install's time. Exits 1 on any failure.
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

/** `out` exists, has an alpha channel, and that alpha has both a background and a subject. */
async function checkCutout(out, who) {
  check(fs.existsSync(out), `${who} wrote ${path.basename(out)}`);
  if (!fs.existsSync(out)) return;
  const { data, info: meta } = await sharp(out).raw().toBuffer({ resolveWithObject: true });
  let clear = 0;
  let solid = 0;
  for (let i = meta.channels - 1; i < data.length; i += meta.channels) {
    if (data[i] < 16) clear++;
    else if (data[i] > 240) solid++;
  }
  const pixels = meta.width * meta.height;
  check(meta.channels === 4, `its output has an alpha channel (${meta.channels} channels)`);
  check(clear > pixels * 0.1 && solid > pixels * 0.1, `its alpha has a background and a subject (${clear} transparent, ${solid} opaque of ${pixels} pixels)`);
}

try {
  // --ignore-scripts: the checkout is already built and prepared (npm install ran prepare).
  const packed = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: root });
  const info = JSON.parse(packed.stdout)[0];
  const tarball = path.join(tmp, info.filename);
  process.stdout.write(`tarball: ${info.filename}, ${(info.size / 1024).toFixed(0)} KiB packed, ${(info.unpackedSize / 1024).toFixed(0)} KiB unpacked, ${info.entryCount} files\n`);

  // The documented command's one addition; nothing else of the caller's environment says skip.
  const inherited = { ...process.env };
  for (const name of ['ONNXRUNTIME_NODE_INSTALL', 'ONNXRUNTIME_NODE_INSTALL_CUDA', 'npm_config_onnxruntime_node_install', 'npm_config_onnxruntime_node_install_cuda']) delete inherited[name];
  const env = { ...inherited, ONNXRUNTIME_NODE_INSTALL: 'skip' };
  const install = run('npm', ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', tarball], { cwd: work, env });
  process.stdout.write(`global install: ${install.seconds.toFixed(1)} s (npm install -g --prefix ${prefix} ${info.filename})\n`);

  const bin = path.join(prefix, 'bin', 'cutout');
  fs.copyFileSync(path.join(root, 'test', 'fixtures', 'astronaut.jpg'), path.join(work, 'photo.jpg'));
  const home = path.join(tmp, 'home');
  const first = run(bin, ['photo.jpg'], { cwd: work, env: { ...process.env, CUTOUT_HOME: home } });
  process.stdout.write(`first run: ${first.seconds.toFixed(1)} s; it printed:\n${(first.stdout + first.stderr).trim().replace(/^/gm, '  | ')}\n`);

  check(!/preparing model/.test(first.stderr), 'the install prepared the model (the first run did not have to)');
  await checkCutout(path.join(work, 'photo.cutout.png'), 'the installed cutout, run in another folder,');
  const shown = run(bin, ['--version'], { cwd: work }).stdout.trim();
  check(shown === version, `cutout --version prints ${version} (${shown})`);

  // The library's install (docs/library.md): `ONNXRUNTIME_NODE_INSTALL=skip npm install cutout` in a new project.
  const project = path.join(tmp, 'project');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }, null, 2));
  const projectInstall = run('npm', ['install', '--no-audit', '--no-fund', tarball], { cwd: project, env });
  process.stdout.write(`project install: ${projectInstall.seconds.toFixed(1)} s (ONNXRUNTIME_NODE_INSTALL=skip npm install ${info.filename}, in a new project)\n`);
  const ortBin = path.join(project, 'node_modules', 'onnxruntime-node', 'bin');
  const providers = fs.readdirSync(ortBin, { recursive: true }).map(String).filter((f) => /providers_(cuda|tensorrt)/.test(f));
  check(providers.length === 0, `no CUDA or TensorRT provider was fetched (${providers.join(', ') || 'none'})`);
  fs.copyFileSync(path.join(root, 'test', 'fixtures', 'astronaut.jpg'), path.join(project, 'photo.jpg'));
  fs.writeFileSync(path.join(project, 'cut.mjs'), "import { removeBackground } from 'cutout';\nimport fs from 'node:fs';\n\nfs.writeFileSync('photo.cutout.png', (await removeBackground('photo.jpg')).data);\n");
  const library = run(process.execPath, ['cut.mjs'], { cwd: project, env: { ...inherited, CUTOUT_HOME: home } });
  process.stdout.write(`the library's first call from the project: ${library.seconds.toFixed(1)} s\n`);
  await checkCutout(path.join(project, 'photo.cutout.png'), 'the library in the project');
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
if (process.exitCode) process.stderr.write('test:pack: the installed package failed a check\n');
else process.stdout.write('test:pack: the packed package installs and runs\n');
