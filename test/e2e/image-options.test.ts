/**
 * remove.bg's image options through the one pipeline object, on the small fixtures at quality
 * fast: a background picture, crop with a margin past the image, roi, scale and position, format
 * auto and zip, the matte alone, translucent and named colours, output areas.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { parseCropMargin, parsePosition, parseRoi } from '../../src/layout-options.js';
import { createPipeline, type RemoveRequest } from '../../src/pipeline/index.js';
import { OptionError } from '../../src/options.js';
import { FIXTURES } from '../helpers/cli.js';
import { readZip } from '../helpers/zip-read.js';

const pipeline = createPipeline();
t.teardown(() => pipeline.close());

const cat = fs.readFileSync(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const cup = fs.readFileSync(path.join(FIXTURES, 'coffee.jpg')); // 600x400
const base: RemoveRequest = { size: 'full', format: 'png', bgColor: null, crop: false, quality: 'fast' };

async function rgba(data: Buffer): Promise<{ data: Buffer; width: number; height: number }> {
  const { data: px, info } = await sharp(data).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data: px, width: info.width, height: info.height };
}

/** Bounding box of alpha >= `threshold` in RGBA pixels. */
function opaqueBox(img: { data: Buffer; width: number; height: number }, threshold = 128): { left: number; top: number; right: number; bottom: number } {
  let left = img.width, top = img.height, right = -1, bottom = -1;
  for (let y = 0; y < img.height; y++) for (let x = 0; x < img.width; x++) {
    if (img.data[(y * img.width + x) * 4 + 3] >= threshold) {
      left = Math.min(left, x); right = Math.max(right, x); top = Math.min(top, y); bottom = Math.max(bottom, y);
    }
  }
  return { left, top, right, bottom };
}

let plainBox: ReturnType<typeof opaqueBox>;
t.before(async () => {
  plainBox = opaqueBox(await rgba((await pipeline.removeBackground(cat, base)).data));
});

t.test('format auto: PNG with transparency, JPEG when the background is opaque', async (t) => {
  const cutout = await pipeline.removeBackground(cat, { ...base, format: 'auto' });
  t.equal(cutout.format, 'png');
  t.equal(cutout.contentType, 'image/png');
  const flat = await pipeline.removeBackground(cat, { ...base, format: 'auto', bgColor: { r: 0, g: 128, b: 0 } });
  t.equal(flat.format, 'jpg');
  t.equal((await sharp(flat.data).metadata()).format, 'jpeg');
  const translucent = await pipeline.removeBackground(cat, { ...base, format: 'auto', bgColor: { r: 0x81, g: 0xd4, b: 0xfa, a: 0x77 } });
  t.equal(translucent.format, 'png', 'a translucent background leaves transparency');
  const px = await rgba(translucent.data);
  t.equal(px.data[3], 0x77, 'a background pixel has the colour\'s alpha');
  t.same([...px.data.subarray(0, 3)], [0x81, 0xd4, 0xfa]);
  const matte = await pipeline.removeBackground(cat, { ...base, format: 'auto', mask: true });
  t.equal(matte.format, 'png', 'the matte alone is written losslessly');
  t.equal((await sharp(matte.data).metadata()).channels, 1);
});

t.test('format zip: exactly color.jpg (RGB JPEG) and alpha.png (8-bit grey), stored, full size', async (t) => {
  const r = await pipeline.removeBackground(cat, { ...base, format: 'zip' });
  t.equal(r.contentType, 'application/zip');
  const entries = readZip(r.data);
  t.same(entries.map((e) => [e.name, e.method]), [['color.jpg', 0], ['alpha.png', 0]]);
  const color = await sharp(entries[0].data).metadata();
  const alpha = await sharp(entries[1].data).metadata();
  t.match(color, { format: 'jpeg', channels: 3, width: 451, height: 300 });
  t.match(alpha, { format: 'png', channels: 1, depth: 'uchar', width: 451, height: 300 });
  const png = await rgba((await pipeline.removeBackground(cat, base)).data);
  const grey = await sharp(entries[1].data).extractChannel(0).raw().toBuffer();
  let same = 0;
  for (let i = 0; i < grey.length; i++) if (grey[i] === png.data[i * 4 + 3]) same++;
  t.equal(same, grey.length, 'alpha.png is the cutout\'s alpha');
  await t.rejects(pipeline.removeBackground(cat, { ...base, format: 'zip', mask: true }), { code: 'invalid_request', reason: 'invalid_format' });
});

t.test('crop with a margin: the canvas grows past the image, transparent there', async (t) => {
  const tight = await pipeline.removeBackground(cat, { ...base, crop: true });
  const margin = await pipeline.removeBackground(cat, { ...base, crop: true, cropMargin: parseCropMargin('40px', 'api') });
  t.equal(margin.width, tight.width + 80);
  t.equal(margin.height, tight.height + 80);
  t.ok(margin.width > 451 || margin.height > 300 || plainBox.left < 40 || plainBox.top < 40, 'the margin reaches past the photo here');
  const px = await rgba(margin.data);
  const box = opaqueBox(px);
  t.ok(Math.abs(box.left - 40) <= 2 && Math.abs(box.top - 40) <= 2, `subject at the margin (${box.left}, ${box.top})`);
  t.equal(px.data[3], 0, 'a corner is transparent');
  const percent = await pipeline.removeBackground(cat, { ...base, crop: true, cropMargin: parseCropMargin('0 10%', 'api') });
  t.equal(percent.height, tight.height);
  t.equal(percent.width, tight.width + 2 * Math.round(tight.width * 0.1));
});

t.test('roi: no foreground outside it; errors for bounds, emptiness, nothing inside', async (t) => {
  const r = await pipeline.removeBackground(cat, { ...base, roi: parseRoi('0% 0% 50% 100%', 'api') });
  const px = await rgba(r.data);
  let outside = 0;
  for (let y = 0; y < px.height; y++) for (let x = Math.ceil(451 / 2) + 1; x < px.width; x++) outside += px.data[(y * px.width + x) * 4 + 3];
  t.equal(outside, 0, 'the right half is transparent');
  t.ok(opaqueBox(px).right >= 0, 'the left half keeps its foreground');
  await t.rejects(pipeline.removeBackground(cat, { ...base, roi: parseRoi('0 0 452px 300px', 'api') }), { name: 'CutoutError', reason: 'roi_exceeds_bounds' });
  await t.rejects(pipeline.removeBackground(cat, { ...base, roi: parseRoi('50% 0 10% 100%', 'api') }), { name: 'CutoutError', reason: 'roi_region_empty' });
  await t.rejects(pipeline.removeBackground(cat, { ...base, roi: parseRoi('0 0 3px 3px', 'api') }), { code: 'no_subject_detected' });
});

t.test('scale and position move the subject on the canvas', async (t) => {
  const half = await rgba((await pipeline.removeBackground(cat, { ...base, scale: 0.5 })).data);
  t.equal(half.width, 451);
  const b = opaqueBox(half);
  const w = b.right - b.left + 1, h = b.bottom - b.top + 1;
  t.ok(Math.max(w / 451, h / 300) <= 0.52 && Math.max(w / 451, h / 300) >= 0.45, `subject fills half the canvas (${w}x${h})`);
  t.ok(Math.abs((b.left + b.right) / 2 - 225) <= 6 && Math.abs((b.top + b.bottom) / 2 - 150) <= 6, 'centred (scale implies center)');
  const moved = await pipeline.removeBackground(cat, { ...base, scale: 0.5, format: 'raw' });
  const f = moved.foreground;
  t.ok(f.width <= 226 && f.height <= 150 && Math.abs(f.left + f.width / 2 - 225.5) <= 2, `the result names the subject's box (${JSON.stringify(f)})`);
  // The subject's box (alpha >= 5 %, the crop box's threshold) against the canvas's top right corner.
  const corner = opaqueBox(await rgba((await pipeline.removeBackground(cat, { ...base, scale: 0.5, position: parsePosition('100% 0%', 'api') })).data), 13);
  t.ok(corner.right >= 447 && corner.top <= 3 && corner.left > 200 && corner.bottom < 160, `top right (${JSON.stringify(corner)})`);
});

t.test('a background picture covers the canvas, centred', async (t) => {
  const stripes = await sharp({ create: { width: 100, height: 300, channels: 3, background: { r: 255, g: 0, b: 0 } } })
    .composite([{ input: { create: { width: 100, height: 100, channels: 3, background: { r: 0, g: 0, b: 255 } } }, top: 100, left: 0 }])
    .png().toBuffer();
  const r = await pipeline.removeBackground(cup, { ...base, format: 'auto', bgImageData: stripes });
  t.equal(r.format, 'jpg', 'an opaque picture makes an opaque result');
  const px = await sharp(r.data).raw().toBuffer();
  // 100x300 covering 600x400: scaled x6 to 600x1800, the middle 400 rows kept: red, blue (600 rows), red.
  const at = (x: number, y: number) => [...px.subarray((y * 600 + x) * 3, (y * 600 + x) * 3 + 3)];
  t.ok(at(5, 5)[2] > 200 && at(5, 5)[0] < 60, `the corner is the blue middle stripe (${at(5, 5)})`);
  await t.rejects(pipeline.removeBackground(cup, { ...base, bgImageData: Buffer.from('not an image') }), { name: 'CutoutError', reason: 'failed_to_read_image', param: 'bg_image' });
  await t.rejects(pipeline.removeBackground(cup, { ...base, bgImageData: stripes, bgColor: { r: 1, g: 2, b: 3 } }), { name: 'CutoutError', reason: 'multiple_bg_sources' });
});

t.test('maxArea sizes the output by area', async (t) => {
  const r = await pipeline.removeBackground(cup, { ...base, size: 'preview', maxArea: 60_000 });
  t.equal(r.resolvedSize, 'preview');
  t.same([r.width, r.height], [300, 200]);
  const full = await pipeline.removeBackground(cup, { ...base, maxArea: 25_000_000 });
  t.same([full.width, full.height], [600, 400]);
});

t.test('errors are OptionErrors with the parameter', async (t) => {
  const err = await pipeline.removeBackground(cat, { ...base, roi: parseRoi('0 0 999px 10px', 'api') }).catch((e: unknown) => e);
  t.ok(err instanceof OptionError);
  t.equal((err as OptionError).param, 'roi');
});
