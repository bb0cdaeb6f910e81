/**
 * Fast lane (docs/testing.md): every picture a phone or a web page gives (issue 55), without the
 * model. HEIC and AVIF (committed, made by libheif's heif-enc) and CMYK, Display P3, 16-bit and
 * greyscale inputs (made here by sharp) decode to the same sRGB pixels as the photo they were made
 * from; EXIF orientation is applied; a cut HEIC is a clear error. Animated GIF, WebP and APNG give
 * their frames and timing; the hold of still pixels; the limits and the price. Then v1 on the
 * stand-in model: an animated WebP answer with `X-Cutout-Frames`, its charge, the sync bound that
 * points at jobs, a job, a still-only format refused, keep_metadata keeping a P3 profile, and
 * remove.bg's door answering a still.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { openImage, decodeRgb, apngFrames } from '../src/pipeline/decode.js';
import { changeWeights, checkAnimationSize, holdStill, readFrames } from '../src/pipeline/animation.js';
import { priceOf } from '../src/billing.js';
import { CutoutError } from '../src/errors.js';
import { balanceOf, bearer, createKey, errorCode, startApi, upload } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';
import { until } from './helpers/process.js';
import { encodeScene, movingScene, resultAlphas } from './helpers/animation.js';

const FORMATS_DIR = path.join(FIXTURES, 'formats');
// The photo the HEIC and AVIF fixtures were made from: coffee.jpg at 300x200.
const reference = await sharp(path.join(FIXTURES, 'coffee.jpg')).resize(300, 200).removeAlpha().raw().toBuffer();

function meanDiff(a: Uint8Array, b: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i] - b[i]);
  return sum / a.length;
}

async function pixelsOf(bytes: Buffer) {
  const src = await openImage(bytes);
  return { src, rgb: await decodeRgb(src, src.probe.width, src.probe.height) };
}

t.test('HEIC and AVIF: told by their bytes, decoded to the photo\'s pixels', async (t) => {
  for (const [file, format] of [['coffee.heic', 'heic'], ['coffee.avif', 'avif']] as const) {
    const bytes = await fs.readFile(path.join(FORMATS_DIR, file));
    const { src, rgb } = await pixelsOf(bytes);
    t.same(src.probe, { format, width: 300, height: 200, frames: 1 }, `${file}: its format and size`);
    const diff = meanDiff(rgb, reference);
    t.ok(diff < 6, `${file}: mean difference from the photo ${diff.toFixed(2)} levels (lossy at q60)`);
  }
  const cut = (await fs.readFile(path.join(FORMATS_DIR, 'coffee.heic'))).subarray(0, 4000);
  const err = await openImage(cut).then(async (src) => decodeRgb(src, 300, 200)).catch((e) => e);
  t.ok(err instanceof CutoutError && err.code === 'unsupported_format', `a cut HEIC is unsupported_format: ${err?.message}`);
});

t.test('colour profiles, 16-bit and greyscale arrive as sRGB', async (t) => {
  const photo = sharp(reference, { raw: { width: 300, height: 200, channels: 3 } });
  const cases: [string, Buffer, number][] = [
    // CMYK's gamut is not sRGB's: the way there and back loses a few levels on saturated colours.
    ['CMYK JPEG with its ICC profile', await photo.clone().withIccProfile('cmyk').jpeg({ quality: 95 }).toBuffer(), 12],
    ['Display P3 PNG', await photo.clone().withIccProfile('p3').png().toBuffer(), 2],
    ['16-bit PNG', await photo.clone().toColourspace('rgb16').png().toBuffer(), 1],
  ];
  for (const [what, bytes, bound] of cases) {
    const { rgb } = await pixelsOf(bytes);
    const diff = meanDiff(rgb, reference);
    t.ok(diff < bound, `${what}: mean difference ${diff.toFixed(2)} levels from the sRGB photo (under ${bound})`);
  }
  // Without the profile applied, the P3 file's own numbers are far from the photo's.
  const p3Raw = await sharp(cases[1][1]).raw().toBuffer();
  const p3Numbers = await sharp(cases[1][1], { ignoreIcc: true }).removeAlpha().raw().toBuffer().catch(() => p3Raw);
  t.ok(meanDiff(p3Numbers, reference) > meanDiff((await pixelsOf(cases[1][1])).rgb, reference), 'the P3 profile changed the numbers');
  const grey = await photo.clone().toColourspace('b-w').png().toBuffer();
  const { rgb } = await pixelsOf(grey);
  t.equal(rgb.length, 300 * 200 * 3, 'greyscale is widened to RGB');
  t.equal(rgb[0], rgb[1], 'with equal channels');
});

t.test('EXIF orientation is applied: a sideways JPEG (orientation 6) reads upright', async (t) => {
  const { src, rgb } = await pixelsOf(await fs.readFile(path.join(FORMATS_DIR, 'rotated-gps.jpg')));
  t.same([src.probe.width, src.probe.height], [300, 200], 'upright size');
  t.ok(meanDiff(rgb, reference) < 6, 'upright pixels');
});

t.test('animations: frames, timing and loop of GIF, WebP and APNG', async (t) => {
  const scene = await movingScene({ width: 96, height: 64, count: 6, at: (i) => ({ x: i * 4 - 60, y: -40 }) });
  for (const format of ['gif', 'webp', 'png'] as const) {
    const bytes = await encodeScene(scene, format);
    const src = await openImage(bytes);
    t.equal(src.frames, 6, `${format}: 6 frames from the header`);
    if (format === 'png') t.equal(apngFrames(bytes), 6, 'the APNG\'s acTL');
    const frames = await readFrames(src);
    t.equal(frames.rgba.length, 6, `${format}: 6 frames decoded`);
    t.same(frames.delays, scene.delays, `${format}: each frame's time`);
    t.equal(frames.loop, 0, `${format}: loops forever`);
  }
  const still = await sharp(reference, { raw: { width: 300, height: 200, channels: 3 } }).gif().toBuffer();
  t.equal((await openImage(still)).frames, 1, 'a still GIF is one frame');
  t.equal(apngFrames(await sharp(reference, { raw: { width: 300, height: 200, channels: 3 } }).png().toBuffer()), 1, 'a plain PNG is one frame');
});

t.test('the hold: alpha kept where nothing near changed, new where it moved', async (t) => {
  const w = 40, h = 20;
  const before = new Uint8Array(w * h * 3).fill(100);
  const after = Uint8Array.from(before);
  after[(10 * w + 30) * 3] = 200; // one pixel changed at (30, 10)
  const weights = changeWeights(before, after, w, h, 2);
  t.equal(weights[10 * w + 30], 1, 'the changed pixel takes the new matte');
  t.equal(weights[10 * w + 28], 1, 'and its neighbours within reach');
  t.equal(weights[10 * w + 27], 0, 'beyond reach it holds');
  t.equal(weights[2 * w + 5], 0, 'far away it holds');
  const held = new Uint8Array(w * h).fill(200);
  const alpha = new Uint8Array(w * h).fill(190);
  holdStill(alpha, held, weights);
  t.equal(alpha[2 * w + 5], 200, 'held alpha where still');
  t.equal(alpha[10 * w + 30], 190, 'the new alpha where it moved');
  const noise = Uint8Array.from(before, (v, i) => (i % 7 === 0 ? v + 10 : v));
  t.equal(changeWeights(before, noise, w, h, 2).reduce((a, b) => a + b, 0), 0, 'a GIF\'s dithering noise (10 levels) is no change');
});

t.test('limits, and the price of one result', async (t) => {
  const src = { probe: { format: 'gif', width: 1000, height: 1000, frames: 100 }, frames: 100 } as any;
  t.throws(() => checkAnimationSize(src, {}), { code: 'image_too_large', reason: 'animation_too_large' }, '100 frames of 1 MP is over the 60 MP budget');
  const many = { probe: { format: 'gif', width: 10, height: 10, frames: 501 }, frames: 501 } as any;
  t.throws(() => checkAnimationSize(many, {}), { code: 'image_too_large', reason: 'animation_too_large' }, 'over 500 frames');
  const small = { probe: { format: 'gif', width: 512, height: 512, frames: 30 }, frames: 30 } as any;
  t.doesNotThrow(() => checkAnimationSize(small, {}), '30 frames of 512x512');
  const err = (() => { try { checkAnimationSize(small, { maxAnimationPixels: 6_600_000 }); } catch (e) { return e as CutoutError; } })();
  t.match(err?.message, /POST \/api\/v1\/jobs/, 'over the sync bound, the message says to use a job');
  t.same([priceOf('full'), priceOf('preview')], [1, 0], 'an animation is one result: 1 credit at full size (api-spec: 0 or 1 a call), previews free');
});

t.test('v1 on the stand-in: animations answered, charged and bounded', async (t) => {
  const srv = await startApi(t, ['--rate-limit', '100000']);
  const key = await createKey(srv.dataDir);
  const scene = await movingScene({ width: 160, height: 120, count: 12, at: (i) => ({ x: i * 5 - 40, y: -20 }) });
  const gif = await encodeScene(scene, 'gif');
  const post = (route: string, image: Buffer, fields: Record<string, string>) => fetch(`${srv.url}${route}`, { method: 'POST', headers: bearer(key.key), body: upload(image, fields) });

  const before = await balanceOf(srv.url, key.key);
  const res = await post('/api/v1/remove', gif, { size: 'full' });
  t.equal(res.status, 200, res.status === 200 ? 'sync answer' : await res.text());
  t.equal(res.headers.get('content-type'), 'image/webp', 'animated WebP when no format is named');
  t.equal(res.headers.get('x-cutout-frames'), '12', 'X-Cutout-Frames');
  const out = await resultAlphas(Buffer.from(await res.arrayBuffer()));
  t.equal(out.alphas.length, 12, '12 frames in the file');
  t.same(out.delays, scene.delays, 'with the input\'s timing');
  t.equal(before - (await balanceOf(srv.url, key.key)), 1, '12 frames at full size: one result, 1 credit');
  t.equal(res.headers.get('x-credits-charged'), '1', 'X-Credits-Charged says so');

  const asGif = await post('/api/v1/remove', gif, { format: 'gif' });
  t.equal(asGif.headers.get('content-type'), 'image/gif', 'format=gif');
  t.equal((await sharp(Buffer.from(await asGif.arrayBuffer())).metadata()).pages, 12, 'an animated GIF of 12 frames');
  const first = await post('/api/v1/remove', gif, { animation: 'first' });
  t.equal(first.headers.get('content-type'), 'image/png', 'animation=first: a still PNG');
  t.equal(first.headers.get('x-cutout-frames'), '1', 'of one frame');

  // A sticker: each frame's own transparency, kept with keep_alpha=auto (the stand-in's ellipse would differ).
  const sticker = await movingScene({ width: 120, height: 90, count: 4, at: (i) => ({ x: i * 8 - 90, y: -60 }) });
  const transparentFrames = sticker.frames.map((f, i) => {
    const rgba = Buffer.from(f);
    for (let p = 0; p < sticker.truth[i].length; p++) rgba[p * 4 + 3] = sticker.truth[i][p] >= 128 ? 255 : 0;
    return rgba;
  });
  const stickerGif = await encodeScene({ ...sticker, frames: transparentFrames }, 'gif');
  const stickerRes = await post('/api/v1/remove', stickerGif, { keep_alpha: 'auto' });
  t.equal(stickerRes.headers.get('x-cutout-frames'), '4', 'keep_alpha=auto on a transparent GIF: 4 frames');
  const keptAlphas = await resultAlphas(Buffer.from(await stickerRes.arrayBuffer()));
  const own = transparentFrames.map((f) => Uint8Array.from({ length: f.length / 4 }, (_, p) => f[p * 4 + 3]));
  t.ok(keptAlphas.alphas.every((a, i) => a.every((v, p) => (v >= 128) === (own[i][p] >= 128))), 'each frame keeps its own transparency');

  const jpg = await errorCode(await post('/api/v1/remove', gif, { format: 'jpg' }));
  t.same([jpg.status, jpg.code], [400, 'invalid_request'], `format=jpg refused: ${jpg.message}`);

  const big = await movingScene({ width: 640, height: 480, count: 24, at: (i) => ({ x: i * 5, y: 100 }) });
  const bigGif = await encodeScene(big, 'gif');
  const refused = await errorCode(await post('/api/v1/remove', bigGif, { size: 'preview' }));
  t.same([refused.status, refused.code], [400, 'image_too_large'], 'over the sync bound');
  t.match(refused.message, /jobs/, `the message says to use a job: ${refused.message}`);
  const created = await post('/api/v1/jobs', bigGif, { size: 'preview' });
  t.equal(created.status, 202, 'the same animation as a job');
  const { job_id: id } = (await created.json()) as { job_id: string };
  let job: any;
  await until('the job to finish', async () => {
    job = await (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key.key) })).json();
    return job.status === 'done' || job.status === 'failed';
  }, 120_000);
  t.equal(job.status, 'done', `the job is done ${JSON.stringify(job.error ?? '')}`);
  t.equal(job.frames, 24, 'and says frames: 24');
  const result = await resultAlphas(Buffer.from(await (await fetch(job.url, { headers: bearer(key.key) })).arrayBuffer()));
  t.equal(result.alphas.length, 24, 'its result has 24 frames');

  // HEIC, AVIF and the rotated JPEG through the same door: upright, at their size.
  for (const file of ['coffee.heic', 'coffee.avif', 'rotated-gps.jpg']) {
    const got = await post('/api/v1/remove', await fs.readFile(path.join(FORMATS_DIR, file)), { format: 'png' });
    t.equal(got.status, 200, `${file} through /remove`);
    const meta = await sharp(Buffer.from(await got.arrayBuffer())).metadata();
    t.same([meta.format, meta.width, meta.height], ['png', 300, 200], `${file}: a 300x200 PNG`);
  }
  const cutHeic = await errorCode(await post('/api/v1/remove', (await fs.readFile(path.join(FORMATS_DIR, 'coffee.heic'))).subarray(0, 4000), {}));
  t.same([cutHeic.status, cutHeic.code], [400, 'unsupported_format'], `a cut HEIC: ${cutHeic.message}`);

  // keep_metadata keeps an RGB profile (Display P3) by converting the pixels back into it.
  const p3 = await sharp(path.join(FIXTURES, 'coffee.jpg')).withIccProfile('p3').jpeg({ quality: 95 }).toBuffer();
  const inIcc = (await sharp(p3).metadata()).icc!;
  const keptRes = await post('/api/v1/remove', p3, { keep_metadata: 'true', format: 'png' });
  const kept = Buffer.from(await keptRes.arrayBuffer());
  const outIcc = (await sharp(kept).metadata()).icc;
  t.ok(outIcc && outIcc.subarray(128).equals(inIcc.subarray(128)), 'keep_metadata: the output carries the input\'s P3 profile');
  const plainRes = await post('/api/v1/remove', p3, { format: 'png' });
  const plain = Buffer.from(await plainRes.arrayBuffer());
  t.notOk((await sharp(plain).metadata()).icc, 'without it, no profile (sRGB)');
  const managed = await sharp(kept).toColourspace('srgb').removeAlpha().raw().toBuffer();
  t.ok(meanDiff(managed, await sharp(plain).removeAlpha().raw().toBuffer()) < 1, 'and the same colours once colour-managed');

  const removebg = await fetch(`${srv.url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': key.key }, body: upload(gif, { size: 'preview' }) });
  t.equal(removebg.status, 200, 'remove.bg\'s door takes the GIF');
  t.equal((await sharp(Buffer.from(await removebg.arrayBuffer())).metadata()).pages ?? 1, 1, 'and answers a still, as remove.bg does');
});
