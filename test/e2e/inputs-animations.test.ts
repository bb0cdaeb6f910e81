/**
 * End-to-end (real model, real CLI): issue 55's "done when". A HEIC, an AVIF, a CMYK JPEG and an
 * EXIF-rotated photo each give the same cutout as the plain photo they were made from; GPS is gone
 * by default and kept with --keep-metadata. A 12-frame GIF of a moving subject gives a 12-frame
 * animated WebP whose frames follow it (IoU >= 0.9 against the subject's own alpha in each frame),
 * a still subject's alpha changes by less than 1 % between frames, and the library says the same.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { spawn } from 'node:child_process';
import { BIN, FIXTURES, runCli } from '../helpers/cli.js';
import { encodeScene, flicker, iou, movingScene, resultAlphas } from '../helpers/animation.js';
import { createRemover } from '../../src/index.js';

const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-inputs-'));
t.teardown(() => fs.rm(dir, { recursive: true, force: true }));

async function alphaOf(file: string): Promise<Uint8Array> {
  return new Uint8Array(await sharp(file).ensureAlpha().extractChannel(3).raw().toBuffer());
}

/** Whether an EXIF block names a GPS IFD (tag 0x8825 in IFD0). */
function hasGps(exif: Buffer | undefined): boolean {
  if (!exif) return false;
  const tiff = exif.subarray(0, 6).toString('latin1') === 'Exif\0\0' ? exif.subarray(6) : exif;
  const le = tiff.toString('latin1', 0, 2) === 'II';
  const u16 = (o: number) => (le ? tiff.readUInt16LE(o) : tiff.readUInt16BE(o));
  const ifd = le ? tiff.readUInt32LE(4) : tiff.readUInt32BE(4);
  for (let e = 0; e < u16(ifd); e++) if (u16(ifd + 2 + e * 12) === 0x8825) return true;
  return false;
}

t.test('HEIC, AVIF, CMYK and a rotated photo: the same cutout as the plain photo', async (t) => {
  const plain = path.join(dir, 'plain.png');
  await sharp(path.join(FIXTURES, 'coffee.jpg')).resize(300, 200).png().toFile(plain);
  await sharp(plain).withIccProfile('cmyk').jpeg({ quality: 92 }).toFile(path.join(dir, 'cmyk.jpg'));
  for (const f of ['coffee.heic', 'rotated-gps.jpg']) await fs.copyFile(path.join(FIXTURES, 'formats', f), path.join(dir, f));
  // Its own base name: coffee.heic and coffee.avif would both write coffee.cutout.png.
  await fs.copyFile(path.join(FIXTURES, 'formats', 'coffee.avif'), path.join(dir, 'photo.avif'));
  const run = await runCli([dir, '--json', '--size', 'full']);
  t.equal(run.code, 0, run.stderr);
  const lines = run.stdout.toString().trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.input);
  t.same(lines.map((l) => path.basename(l.input)).sort(), ['cmyk.jpg', 'coffee.heic', 'photo.avif', 'plain.png', 'rotated-gps.jpg'], 'the folder scan took .heic and .avif with the rest');
  const truth = await alphaOf(path.join(dir, 'plain.cutout.png'));
  for (const name of ['coffee', 'photo', 'cmyk', 'rotated-gps']) {
    const file = path.join(dir, `${name}.cutout.png`);
    const meta = await sharp(file).metadata();
    t.same([meta.width, meta.height], [300, 200], `${name}: upright, full size`);
    const score = iou(await alphaOf(file), truth);
    t.ok(score >= 0.9, `${name}: IoU ${score.toFixed(3)} with the plain photo's cutout`);
  }

  const stripped = await sharp(path.join(dir, 'rotated-gps.cutout.png')).metadata();
  t.notOk(hasGps(stripped.exif), 'GPS is gone by default');
  const kept = path.join(dir, 'kept.jpg');
  const keep = await runCli([path.join(dir, 'rotated-gps.jpg'), '--keep-metadata', '--bg-color', 'white', '--out', kept]);
  t.equal(keep.code, 0, keep.stderr);
  const keptMeta = await sharp(kept).metadata();
  t.ok(hasGps(keptMeta.exif), 'GPS kept with --keep-metadata');
  t.equal(keptMeta.orientation, 1, 'orientation upright, as the pixels are');

  await using remover = await createRemover();
  const heic = await remover.remove(path.join(dir, 'coffee.heic'), { format: 'raw', size: 'full' });
  t.same(heic.input, { format: 'heic', width: 300, height: 200, frames: 1 }, 'the library reads HEIC');
  const alpha = Uint8Array.from({ length: 300 * 200 }, (_, i) => heic.data[i * 4 + 3]);
  t.ok(iou(alpha, truth) >= 0.9, 'and cuts it out as the CLI does');
});

t.test('a moving subject: 12 frames that follow it; a still one: no flicker', async (t) => {
  const moving = await movingScene({ width: 320, height: 240, count: 12, at: (i) => ({ x: 10 + i * 9, y: 40 + (i % 4) * 3 }) });
  const still = await movingScene({ width: 320, height: 240, count: 12, at: () => ({ x: 20, y: 60 }), ball: true });
  await fs.writeFile(path.join(dir, 'moving.gif'), await encodeScene(moving, 'gif'));
  await fs.writeFile(path.join(dir, 'still.webp'), await encodeScene(still, 'webp'));
  await fs.writeFile(path.join(dir, 'moving-apng.png'), await encodeScene(moving, 'png'));
  const run = await runCli([path.join(dir, 'moving.gif'), path.join(dir, 'still.webp'), path.join(dir, 'moving-apng.png'), '--json']);
  t.equal(run.code, 0, run.stderr);
  const lines = run.stdout.toString().trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.input);
  // Two run at once: the lines come in the order they finish.
  t.same(lines.map((l) => [path.basename(l.output), l.frames]).sort(), [['moving-apng.cutout.webp', 12], ['moving.cutout.webp', 12], ['still.cutout.webp', 12]], 'each animation as animated WebP, 12 frames');
  for (const name of ['moving', 'moving-apng']) {
    const out = await resultAlphas(await fs.readFile(path.join(dir, `${name}.cutout.webp`)));
    t.equal(out.alphas.length, 12, `${name}: 12 frames in the file`);
    t.same(out.delays, moving.delays, `${name}: the input's timing`);
    const scores = out.alphas.map((a, i) => iou(a, moving.truth[i]));
    t.ok(Math.min(...scores) >= 0.9, `${name}: every frame follows the subject (IoU ${Math.min(...scores).toFixed(3)} at worst)`);
  }
  const out = await resultAlphas(await fs.readFile(path.join(dir, 'still.cutout.webp')));
  const near = still.truth[0].map((v) => (v > 0 ? 1 : 0));
  const shimmer = flicker(out.alphas, near);
  t.ok(shimmer < 0.01, `the still subject's alpha changes by ${(shimmer * 100).toFixed(2)} % of its range between frames (under 1 %)`);
  t.ok(Math.min(...out.alphas.map((a, i) => iou(a, still.truth[i]))) >= 0.9, 'and is cut out right');

  const gif = await runCli([path.join(dir, 'moving.gif'), '--format', 'gif', '--out', path.join(dir, 'as.gif')]);
  t.equal(gif.code, 0, gif.stderr);
  t.equal((await sharp(path.join(dir, 'as.gif')).metadata()).pages, 12, '--format gif: an animated GIF');
  const jpg = await runCli([path.join(dir, 'moving.gif'), '--format', 'jpg', '--out', path.join(dir, 'as.jpg')]);
  t.equal(jpg.code, 1, 'jpg cannot hold an animation: the input fails');
  t.match(jpg.stderr, /cannot hold an animation/, jpg.stderr.trim());

  await using remover = await createRemover();
  const res = await remover.remove(path.join(dir, 'moving.gif'));
  t.same([res.format, res.frames, res.contentType], ['webp', 12, 'image/webp'], 'the library: animated WebP, frames 12');
  t.ok(res.confidence > 0 && res.confidence <= 1, `confidence ${res.confidence.toFixed(3)} (the lowest frame's)`);
  const firstOnly = await remover.remove(path.join(dir, 'moving.gif'), { animation: 'first' });
  t.same([firstOnly.format, firstOnly.frames], ['png', 1], 'animation: first gives a still');
});

t.test('a hot folder names an animation it is given .webp, as the list does', async (t) => {
  const hot = path.join(dir, 'hot');
  await fs.mkdir(hot);
  const child = spawn(process.execPath, [BIN, hot, '--watch', '--out', path.join(hot, 'out'), '--json', '--no-progress'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d));
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
  t.teardown(() => child.kill('SIGKILL'));
  const until = async (what: string, check: () => boolean) => {
    for (const end = Date.now() + 120_000; !check(); await new Promise((r) => setTimeout(r, 50))) if (Date.now() > end) throw new Error(`timed out: ${what}: ${stderr}`);
  };
  await until('the watcher ready', () => /watching/.test(stderr));
  const scene = await movingScene({ width: 320, height: 240, count: 6, at: (i) => ({ x: 20 + i * 10, y: 40 }) });
  await fs.writeFile(path.join(hot, 'sticker.gif'), await encodeScene(scene, 'gif'));
  await until('the animation done', () => /"frames":6/.test(stdout));
  child.kill('SIGTERM');
  t.equal(await closed, 0, 'SIGTERM ends the watch with exit 0');
  const line = JSON.parse(stdout.trim().split('\n').find((l) => l.includes('sticker'))!);
  t.equal(path.basename(line.output), 'sticker.cutout.webp', 'its output is named .webp');
  t.equal((await resultAlphas(await fs.readFile(line.output))).alphas.length, 6, 'and holds the 6 frames');
});
