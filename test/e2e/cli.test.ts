/**
 * The CLI end to end: the real bin/cutout in a child process, the real model, a real SQLite
 * ledger in a temporary data directory.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { alphaAt, FIXTURES, runCli } from '../helpers/cli.js';

function workdir(t: Tap.Test | any): { dir: string; env: Record<string, string> } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-cli-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, env: { CUTOUT_HOME: path.join(dir, 'home') } };
}

t.test('cutout photo.jpg writes photo.cutout.png with a transparent background', async (t) => {
  const { dir, env } = workdir(t);
  fs.copyFileSync(path.join(FIXTURES, 'astronaut.jpg'), path.join(dir, 'astronaut.jpg'));
  const r = await runCli(['astronaut.jpg'], { cwd: dir, env });
  t.equal(r.code, 0, r.stderr);
  const out = path.join(dir, 'astronaut.cutout.png');
  const meta = await sharp(out).metadata();
  t.equal(meta.format, 'png');
  t.equal(meta.width, 512);
  t.equal(meta.height, 512);
  t.equal(meta.channels, 4);
  // Top corners are sky/background; the astronaut's chest is at the lower middle.
  const [tl, tr, chest, face] = await alphaAt(out, [[3, 3], [508, 3], [180, 400], [210, 140]]);
  t.ok(tl < 16 && tr < 16, `corners transparent (${tl}, ${tr})`);
  t.ok(chest > 240 && face > 240, `subject opaque (${chest}, ${face})`);

  const again = await runCli(['astronaut.jpg'], { cwd: dir, env });
  t.equal(again.code, 1, 'an existing output is refused');
  t.match(again.stderr, /astronaut\.jpg: Output astronaut\.cutout\.png exists; use --overwrite or --skip-existing/);
  const skip = await runCli(['astronaut.jpg', '--skip-existing', '--json'], { cwd: dir, env });
  t.equal(skip.code, 0);
  t.equal(JSON.parse(skip.stdout.toString()).skipped, true);

  // Every local run is recorded in the ledger: one done run today, free.
  const usage = await runCli(['usage', '--json'], { cwd: dir, env });
  t.equal(usage.code, 0, usage.stderr);
  const today = JSON.parse(usage.stdout.toString()).days[0];
  t.equal(today.date, new Date().toISOString().slice(0, 10));
  t.equal(today.requests, 1, 'the refused and skipped runs made no cutout and are not recorded');
  t.equal(today.credits, 0);
});

t.test('--key charges that key by the server rules: full costs 1, preview is free', async (t) => {
  const { dir, env } = workdir(t);
  const created = await runCli(['keys', 'create', '--json'], { cwd: dir, env });
  t.equal(created.code, 0, created.stderr);
  const { key } = JSON.parse(created.stdout.toString());
  const full = await runCli([path.join(FIXTURES, 'chelsea.jpg'), '--key', key, '--out', 'a.png', '--json'], { cwd: dir, env });
  t.equal(full.code, 0, full.stderr);
  t.equal(JSON.parse(full.stdout.toString()).credits_charged, 1);
  const preview = await runCli([path.join(FIXTURES, 'chelsea.jpg'), '--key', key, '--size', 'preview', '--out', 'b.png', '--json'], { cwd: dir, env });
  t.equal(JSON.parse(preview.stdout.toString()).credits_charged, 0);
  const account = await runCli(['account', '--key', key, '--json'], { cwd: dir, env });
  t.equal(JSON.parse(account.stdout.toString()).balance, 9);
  const bad = await runCli([path.join(FIXTURES, 'chelsea.jpg'), '--key', 'cut_live_nope'], { cwd: dir, env });
  t.equal(bad.code, 2);
  t.match(bad.stderr, /invalid or revoked API key/);
});

t.test('bad inputs fail one by one, each named with its reason, and the others are done', async (t) => {
  const { dir, env } = workdir(t);
  fs.copyFileSync(path.join(FIXTURES, 'chelsea.jpg'), path.join(dir, 'good.jpg'));
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'not an image\n');
  fs.writeFileSync(path.join(dir, 'truncated.jpg'), fs.readFileSync(path.join(FIXTURES, 'coffee.jpg')).subarray(0, 4000));
  fs.writeFileSync(path.join(dir, 'empty.png'), Buffer.alloc(0));
  await sharp({ create: { width: 10000, height: 6000, channels: 3, background: '#888' } }).png({ compressionLevel: 9 }).toFile(path.join(dir, 'huge.png'));
  const r = await runCli(['notes.txt', 'truncated.jpg', 'huge.png', 'empty.png', 'missing.jpg', 'good.jpg', '--json', '--no-progress'], { cwd: dir, env });
  t.equal(r.code, 1);
  const lines = r.stderr.trim().split('\n');
  t.equal(lines.length, 6, r.stderr);
  t.match(lines[5], /^cutout: 1 done, 0 skipped, 5 failed in [\d.]+ s/, 'a batch ends with its summary line');
  t.match(r.stderr, /notes\.txt: Not a JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF or HEIC image/);
  t.match(r.stderr, /truncated\.jpg: Truncated JPEG file/);
  t.match(r.stderr, /huge\.png: Image is 10000x6000 \(60 MP\); the limit is 50 megapixels/);
  t.match(r.stderr, /empty\.png: Empty file/);
  t.match(r.stderr, /missing\.jpg: No such file/);
  const reports = r.stdout.toString().trim().split('\n').map((l) => JSON.parse(l));
  t.match(reports.pop(), { summary: { done: 1, skipped: 0, failed: 5 } }, 'and with --json its summary object');
  t.equal(reports.length, 6);
  const byInput = Object.fromEntries(reports.map((x) => [x.input, x]));
  t.same(byInput['good.jpg'].error, null);
  t.equal(byInput['good.jpg'].width, 451);
  t.equal(byInput['huge.png'].error.code, 'image_too_large');
  t.equal(byInput['notes.txt'].error.code, 'unsupported_format');
  t.ok(fs.existsSync(path.join(dir, 'good.cutout.png')));
});

t.test('folders, quoted globs, --out layout, formats, background colour, crop and mask', async (t) => {
  const { dir, env } = workdir(t);
  fs.mkdirSync(path.join(dir, 'in', 'sub'), { recursive: true });
  fs.copyFileSync(path.join(FIXTURES, 'coffee.jpg'), path.join(dir, 'in', 'coffee.jpg'));
  fs.copyFileSync(path.join(FIXTURES, 'chelsea.jpg'), path.join(dir, 'in', 'sub', 'cat.jpg'));

  const flat = await runCli(['in', '--out', 'out1', '--format', 'webp'], { cwd: dir, env });
  t.equal(flat.code, 0, flat.stderr);
  t.same(fs.readdirSync(path.join(dir, 'out1')), ['coffee.cutout.webp'], 'without --recursive the sub-folder is left alone');
  t.equal((await sharp(path.join(dir, 'out1', 'coffee.cutout.webp')).metadata()).format, 'webp');

  const rec = await runCli(['in/**/*.jpg', '--out', 'out2', '--bg-color', '#00ff00', '--crop'], { cwd: dir, env });
  t.equal(rec.code, 0, rec.stderr);
  const cat = path.join(dir, 'out2', 'sub', 'cat.cutout.png');
  t.ok(fs.existsSync(cat), 'the glob keeps the relative layout under --out');
  const coffeeMeta = await sharp(path.join(dir, 'out2', 'coffee.cutout.png')).metadata();
  t.ok(coffeeMeta.width! < 600 && coffeeMeta.height! < 400, `crop shrinks to the subject (${coffeeMeta.width}x${coffeeMeta.height})`);
  const { data, info } = await sharp(cat).raw().toBuffer({ resolveWithObject: true });
  t.equal(info.channels, 3, 'a background colour gives an opaque image');
  t.ok(info.width < 451 || info.height < 300, 'cropped');

  const mask = await runCli(['in/coffee.jpg', '--mask', '--out', 'mask.png'], { cwd: dir, env });
  t.equal(mask.code, 0, mask.stderr);
  const m = await sharp(path.join(dir, 'mask.png')).metadata();
  t.equal(m.channels, 1, 'the matte alone is greyscale');
  t.ok(data.length > 0);

  const jpg = await runCli(['in/coffee.jpg', '--out', 'flat.jpg'], { cwd: dir, env });
  t.equal(jpg.code, 0, jpg.stderr);
  t.equal((await sharp(path.join(dir, 'flat.jpg')).metadata()).format, 'jpeg', 'format from the extension of --out');
});

t.test('stdin to stdout, and a BMP input', async (t) => {
  const { dir, env } = workdir(t);
  const r = await runCli(['-', '--out', '-', '--size', 'preview'], { cwd: dir, env, stdin: fs.readFileSync(path.join(FIXTURES, 'coffee.jpg')) });
  t.equal(r.code, 0, r.stderr);
  const meta = await sharp(r.stdout).metadata();
  t.equal(meta.format, 'png');
  t.equal(meta.width, 600);

  // sharp cannot read BMP: ours decodes it first.
  const bmp = await import('bmp-ts');
  const { data, info } = await sharp(path.join(FIXTURES, 'chelsea.jpg')).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  // bmp-ts takes ABGR byte order.
  const abgr = Buffer.alloc(data.length);
  for (let i = 0; i < data.length; i += 4) { abgr[i] = 255; abgr[i + 1] = data[i + 2]; abgr[i + 2] = data[i + 1]; abgr[i + 3] = data[i]; }
  fs.writeFileSync(path.join(dir, 'cat.bmp'), bmp.encode({ data: abgr, width: info.width, height: info.height, bitPP: 24 } as any).data);
  const b = await runCli(['cat.bmp'], { cwd: dir, env });
  t.equal(b.code, 0, b.stderr);
  t.equal((await sharp(path.join(dir, 'cat.cutout.png')).metadata()).width, 451);
});

t.test('usage errors exit with 2', async (t) => {
  const { dir, env } = workdir(t);
  const bad = await runCli(['--size', 'huge', path.join(FIXTURES, 'coffee.jpg')], { cwd: dir, env });
  t.equal(bad.code, 2);
  t.match(bad.stderr, /Expected one of preview, full, auto for --size but received "huge"/);
  const nothing = await runCli(['nothing-here-*.jpg'], { cwd: dir, env });
  t.equal(nothing.code, 2);
  t.match(nothing.stderr, /nothing matched: nothing-here-\*\.jpg/);
  const unknown = await runCli(['--frobnicate', 'x.jpg'], { cwd: dir, env });
  t.equal(unknown.code, 2);
  const color = await runCli(['--bg-color', 'reddish', path.join(FIXTURES, 'coffee.jpg')], { cwd: dir, env });
  t.equal(color.code, 2);
  const help = await runCli(['--help'], { cwd: dir, env });
  t.equal(help.code, 0);
  t.match(help.stdout.toString(), /remove/);
  const version = await runCli(['--version'], { cwd: dir, env });
  t.match(version.stdout.toString(), /^\d+\.\d+\.\d+/);
});

t.test('models list names the licence; verify checks the checksum', async (t) => {
  const { dir, env } = workdir(t);
  const list = await runCli(['models', 'list'], { cwd: dir, env });
  t.equal(list.code, 0, list.stderr);
  t.match(list.stdout.toString(), /isnet-medium \(default\)[\s\S]*licence: AGPL-3\.0/);
  const verify = await runCli(['models', 'verify', 'isnet-medium'], { cwd: dir, env });
  t.equal(verify.code, 0, verify.stderr);
  t.match(verify.stdout.toString(), /ok +isnet-medium: checksum ok/);
  // npm install's prepare runs `models pull`, which builds the quality variants too.
  const json = await runCli(['models', 'list', '--json'], { cwd: dir, env });
  const medium = json.stdout.toString().trim().split('\n').map((l) => JSON.parse(l)).find((r) => r.name === 'isnet-medium');
  t.same(medium.variants, [{ quality: 'fast', side: 512, present: true }, { quality: 'balanced', side: 768, present: true }]);
  t.match(list.stdout.toString(), /quality variants: fast 512px built, balanced 768px built/);
});
