/**
 * `--quality max`: the subject's box on the model's grid (pure functions on tiny arrays), and the
 * second pass through the real pipeline on a fixture made small in a wide frame, upright and with
 * an EXIF rotation.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { pasteMatte, scaleBox, zoomBox, ZOOM_PARAMS } from '../../src/pipeline/zoom.js';
import { createPipeline } from '../../src/pipeline/index.js';
import { FIXTURES } from '../helpers/cli.js';

const pipeline = createPipeline();
t.teardown(() => pipeline.close());

t.test('zoomBox pads the subject\'s box and maps it to output pixels', async (t) => {
  // A 10x10 grid over a 100x50 image; the subject covers cells x 4..5, y 4..5.
  const m = new Float32Array(100);
  for (const [x, y] of [[4, 4], [5, 4], [4, 5], [5, 5]]) m[y * 10 + x] = 0.9;
  m[0] = ZOOM_PARAMS.threshold / 2; // under the threshold: not the subject
  const params = { ...ZOOM_PARAMS, pad: 0.5, minSide: 1 };
  // Box 40..60 x 20..30 in pixels, padded by half its size on each side.
  t.same(zoomBox(m, 10, 10, 100, 50, params), { left: 30, top: 15, width: 40, height: 20 });
  t.equal(zoomBox(new Float32Array(100), 10, 10, 100, 50, params), null, 'no subject: no box');
  t.equal(zoomBox(m, 10, 10, 100, 50, { ...params, pad: 3 }), null, 'a box over most of the image: no second pass');
  t.equal(zoomBox(m, 10, 10, 100, 50, { ...params, minSide: 21 }), null, 'a box too small to be worth a pass');
  const edge = new Float32Array(100);
  edge[9] = 1;
  t.same(zoomBox(edge, 10, 10, 100, 50, params), { left: 85, top: 0, width: 15, height: 8 }, 'clamped at the image border');
});

t.test('scaleBox maps a box to the source size; pasteMatte writes it back', async (t) => {
  t.same(scaleBox({ left: 10, top: 5, width: 20, height: 10 }, 100, 50, 400, 200), { left: 40, top: 20, width: 80, height: 40 });
  t.same(scaleBox({ left: 99, top: 49, width: 1, height: 1 }, 100, 50, 30, 15), { left: 29, top: 14, width: 1, height: 1 }, 'never empty, never outside');
  const alpha = new Uint8Array(5 * 4);
  pasteMatte(alpha, 5, Uint8Array.from([1, 2, 3, 4, 5, 6]), { left: 1, top: 2, width: 3, height: 2 });
  t.same(Array.from(alpha), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0]);
});

async function alphaOf(png: Buffer): Promise<Buffer> {
  return sharp(png).extractChannel(3).raw().toBuffer();
}

function iou(a: Uint8Array, b: Uint8Array): number {
  let inter = 0, union = 0;
  for (let i = 0; i < a.length; i++) {
    const p = a[i] >= 128, q = b[i] >= 128;
    if (p && q) inter++;
    if (p || q) union++;
  }
  return inter / union;
}

t.test('max runs a second pass on a small subject and changes the matte only in its box', async (t) => {
  // The cup cut out of coffee.jpg (600x400), laid on a flat 1800x1200 frame: a small subject
  // whose true matte is known (the cut-out's own). At fp32: this checks the zoomed pass's
  // geometry (its box, and the box of a rotated photo), and the rotated copy is a second JPEG
  // encoding, whose noise int8 turns into larger matte differences (the quality bench scores int8).
  const base = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false, precision: 'fp32' as const };
  const cutout = await pipeline.removeBackground(fs.readFileSync(path.join(FIXTURES, 'coffee.jpg')), { ...base, quality: 'best' });
  const framed = await sharp({ create: { width: 1800, height: 1200, channels: 3, background: { r: 236, g: 236, b: 232 } } })
    .composite([{ input: cutout.data, left: 600, top: 400 }]).jpeg({ quality: 92 }).toBuffer();
  const truth = await sharp({ create: { width: 1800, height: 1200, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } })
    .composite([{ input: cutout.data, left: 600, top: 400 }]).png().toBuffer().then(alphaOf);
  const best = await pipeline.removeBackground(framed, { ...base, quality: 'best' });
  const max = await pipeline.removeBackground(framed, { ...base, quality: 'max' });
  t.same([max.width, max.height], [1800, 1200]);
  const a = await alphaOf(best.data), b = await alphaOf(max.data);
  let changed = 0, changedNearBorder = 0;
  for (let y = 0; y < 1200; y++) {
    for (let x = 0; x < 1800; x++) {
      const i = y * 1800 + x;
      if (a[i] === b[i]) continue;
      changed++;
      if (x < 300 || x >= 1500 || y < 200 || y >= 1000) changedNearBorder++;
    }
  }
  t.ok(changed > 1000, `the second pass changed the matte (${changed} pixels)`);
  t.equal(changedNearBorder, 0, 'nothing changed outside the subject\'s padded box');
  t.ok(iou(b, truth) > 0.9, `the subject found (IoU ${iou(b, truth).toFixed(3)} with the true matte; best ${iou(a, truth).toFixed(3)})`);

  // The same photo stored on its side with EXIF orientation 6: the box is cut from the upright image.
  const sideways = await sharp(framed).rotate(270).withMetadata({ orientation: 6 }).jpeg({ quality: 92 }).toBuffer();
  const turned = await pipeline.removeBackground(sideways, { ...base, quality: 'max' });
  t.same([turned.width, turned.height], [1800, 1200], 'upright output');
  const c = await alphaOf(turned.data);
  // Far closer to the upright max than to best: a box cut from the unrotated pixels would miss the cup.
  const distance = (p: Uint8Array, q: Uint8Array) => p.reduce((sum, v, i) => sum + Math.abs(v - q[i]), 0);
  t.ok(distance(b, c) < 0.25 * distance(a, b), `same matte as upright (distance ${distance(b, c)}, best to max ${distance(a, b)})`);
});

t.test('max leaves a photo whose subject fills the frame as best does', async (t) => {
  const photo = fs.readFileSync(path.join(FIXTURES, 'astronaut.jpg'));
  const base = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false };
  const best = await pipeline.removeBackground(photo, { ...base, quality: 'best' });
  const max = await pipeline.removeBackground(photo, { ...base, quality: 'max' });
  t.same(await alphaOf(max.data), await alphaOf(best.data), 'no second pass, the same matte');
});
