/**
 * The packed package as a consumer gets it (issue 25): `npm pack`, unpacked into a fresh folder's
 * node_modules/cutout, then a three-line ESM script, the same from CommonJS (require(esm), Node
 * >= 20.19), a strict TypeScript consumer (`module: nodenext`) in which a wrong option is a type
 * error, and the exports map hiding everything but the entry. The package's dependencies are this
 * checkout's node_modules (linked), and its model cache this checkout's: what is tested is what the
 * tarball holds, not the registry (`npm run test:pack` installs from the registry too).
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { FIXTURES, ROOT } from '../helpers/cli.js';

/** The ```js blocks of a Markdown file (of one section of it, when `section` names its heading). */
export function jsBlocks(file: string, section?: string): string[] {
  let text = fs.readFileSync(file, 'utf8');
  if (section) {
    const start = text.indexOf(`\n## ${section}\n`);
    if (start < 0) throw new Error(`no section "${section}" in ${file}`);
    const end = text.indexOf('\n## ', start + 1);
    text = text.slice(start, end < 0 ? undefined : end);
  }
  return [...text.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

function run(cmd: string, args: string[], cwd: string, timeout = 120_000) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout, env: { ...process.env, NODE_OPTIONS: '' } });
  return { code: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', timedOut: r.error !== undefined };
}

/** A fresh folder with the packed cutout in node_modules. */
function consumer(t: Tap.Test): string {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-consumer-'));
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const packed = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], ROOT);
  if (packed.code !== 0) throw new Error(`npm pack failed: ${packed.stderr}`);
  const tarball = path.join(tmp, (JSON.parse(packed.stdout) as { filename: string }[])[0].filename);
  const app = path.join(tmp, 'app');
  const pkg = path.join(app, 'node_modules', 'cutout');
  fs.mkdirSync(pkg, { recursive: true });
  const untar = run('tar', ['-xzf', tarball, '-C', pkg, '--strip-components=1'], tmp);
  if (untar.code !== 0) throw new Error(`tar failed: ${untar.stderr}`);
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
  fs.symlinkSync(path.join(ROOT, 'models', 'cache'), path.join(pkg, 'models', 'cache'));
  fs.mkdirSync(path.join(app, 'node_modules', '@types'));
  fs.symlinkSync(path.join(ROOT, 'node_modules', '@types', 'node'), path.join(app, 'node_modules', '@types', 'node'));
  // The examples of the docs chain into sharp, as a user's own dependency.
  fs.symlinkSync(path.join(ROOT, 'node_modules', 'sharp'), path.join(app, 'node_modules', 'sharp'));
  fs.copyFileSync(path.join(FIXTURES, 'coffee.jpg'), path.join(app, 'photo.jpg'));
  return app;
}

async function isCutout(file: string): Promise<boolean> {
  const { data, info } = await sharp(file).raw().toBuffer({ resolveWithObject: true });
  let clear = 0;
  let solid = 0;
  for (let i = 3; i < data.length; i += 4) {
    if (data[i] < 16) clear++;
    else if (data[i] > 240) solid++;
  }
  return info.channels === 4 && clear > 0.1 * info.width * info.height && solid > 0.1 * info.width * info.height;
}

t.test('the packed package from a fresh folder: ESM, CommonJS, strict TypeScript', async (t) => {
  const app = consumer(t);
  const files = fs.readdirSync(path.join(app, 'node_modules', 'cutout', 'dist'));
  t.ok(files.includes('index.js') && files.includes('index.d.ts'), 'the tarball holds the entry and its declarations');

  // Importing runs nothing: no output, no thread, no handle beyond those of a script that imports nothing (its stdio).
  const handles = (body: string) => {
    fs.writeFileSync(path.join(app, 'handles.mjs'), `${body}\nawait new Promise((r) => setTimeout(r, 50));\nconsole.log(JSON.stringify(process.getActiveResourcesInfo()));\n`);
    return run(process.execPath, ['handles.mjs'], app);
  };
  const baseline = handles('');
  const quiet = handles("await import('cutout');");
  t.same([quiet.code, quiet.stdout, quiet.stderr], [0, baseline.stdout, ''], `import opens nothing and prints nothing (${quiet.stdout.trim()})`);

  // Three lines of ESM write a cutout, and the script exits by itself (the run's timeout is the check).
  fs.writeFileSync(path.join(app, 'esm.mjs'), "import { removeBackground } from 'cutout';\nimport fs from 'node:fs';\nfs.writeFileSync('esm.png', (await removeBackground('photo.jpg')).data);\n");
  const esm = run(process.execPath, ['esm.mjs'], app);
  t.same([esm.code, esm.timedOut], [0, false], `ESM: exits by itself with 0 ${esm.stderr}`);
  t.ok(fs.existsSync(path.join(app, 'esm.png')) && (await isCutout(path.join(app, 'esm.png'))), 'ESM: a cutout with a background and a subject');

  fs.writeFileSync(path.join(app, 'cjs.cjs'), "const { removeBackground, CutoutError } = require('cutout');\nconst fs = require('node:fs');\nremoveBackground(fs.readFileSync('photo.jpg')).then((r) => fs.writeFileSync('cjs.png', r.data));\nremoveBackground(Buffer.from('text')).catch((e) => console.log(e instanceof CutoutError, e.code));\n");
  const cjs = run(process.execPath, ['cjs.cjs'], app);
  t.same([cjs.code, cjs.timedOut, cjs.stdout.trim()], [0, false, 'true unsupported_format'], `CommonJS: require works, errors are CutoutErrors ${cjs.stderr}`);
  t.notMatch(cjs.stderr, /ExperimentalWarning/, 'no warning from require(esm)');
  t.ok(fs.existsSync(path.join(app, 'cjs.png')) && (await isCutout(path.join(app, 'cjs.png'))), 'CommonJS: a cutout');

  // Internals are not reachable: the exports map has the entry and package.json only.
  fs.writeFileSync(path.join(app, 'deep.mjs'), "try { await import('cutout/dist/cli.js'); console.log('reached'); } catch (e) { console.log(e.code); }\n");
  t.equal(run(process.execPath, ['deep.mjs'], app).stdout.trim(), 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'dist/cli.js is not exported');

  // A strict TypeScript consumer compiles; a wrong option does not.
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', type: 'module', private: true }));
  fs.writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, types: ['node'], lib: ['es2022', 'esnext.disposable', 'dom'] }, include: ['good.ts'] }));
  fs.writeFileSync(path.join(app, 'good.ts'), [
    "import { createRemover, removeBackground, CutoutError, type CutoutResult, type RemoveOptions, type ErrorCode } from 'cutout';",
    "const options: RemoveOptions = { format: 'raw', size: 'preview', bgColor: '#fff', quality: 'fast', alpha: 'hard', signal: AbortSignal.timeout(1000) };",
    "const r: CutoutResult = await removeBackground(new Uint8Array(4), options);",
    'const channels: 1 | 3 | 4 = r.channels;',
    "await using remover = await createRemover({ precision: 'int8', concurrency: 2, onProgress: (e) => console.log(e.step) });",
    "await remover.remove({ data: new Uint8Array(12), width: 2, height: 2, channels: 3 }, { mask: true });",
    "try { await remover.remove('photo.jpg'); } catch (e) { if (e instanceof CutoutError) { const code: ErrorCode = e.code; console.log(code, channels); } }",
    '',
  ].join('\n'));
  const good = run(process.execPath, [TSC, '-p', 'tsconfig.json'], app);
  t.same([good.code, good.stdout], [0, ''], 'a strict nodenext consumer compiles');
  fs.writeFileSync(path.join(app, 'bad.ts'), "import { removeBackground } from 'cutout';\nawait removeBackground('photo.jpg', { format: 'tiff' });\n");
  fs.writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({ ...JSON.parse(fs.readFileSync(path.join(app, 'tsconfig.json'), 'utf8')), include: ['bad.ts'] }));
  const bad = run(process.execPath, [TSC, '-p', 'tsconfig.json'], app);
  t.equal(bad.code, 2, 'format: "tiff" fails to compile');
  t.match(bad.stdout, /bad\.ts\(2,\d+\): error TS2322: Type '"tiff"' is not assignable/, 'the error names the option');
});

t.test('the examples of docs/library.md and of the README run against the packed package', async (t) => {
  const app = consumer(t);
  const blocks = [
    ...jsBlocks(path.join(ROOT, 'README.md'), 'The library').map((code, i) => ({ name: `README example ${i + 1}`, code })),
    ...jsBlocks(path.join(ROOT, 'docs', 'library.md')).map((code, i) => ({ name: `docs/library.md example ${i + 1}`, code })),
  ];
  t.ok(blocks.length >= 9, `${blocks.length} examples found`);
  for (const [i, block] of blocks.entries()) {
    const file = path.join(app, `example-${i}.mjs`);
    fs.writeFileSync(file, block.code);
    const r = run(process.execPath, [file], app);
    t.same([r.code, r.timedOut], [0, false], `${block.name} runs and exits by itself${r.stderr ? `: ${r.stderr.trim()}` : ''}`);
  }
  t.ok(await isCutout(path.join(app, 'photo.cutout.png')), 'the first example wrote a cutout');
  t.ok(fs.existsSync(path.join(app, 'thumb.webp')), 'the sharp chain wrote its thumbnail');
});
