/**
 * Edge quality end to end on a committed fixture: a composite of the coffee cup over pure green
 * (made here from the fixture and its own matte), cut out again. With decontamination the colours
 * of the soft edge come back toward the true foreground colours; refinement keeps the interior opaque and
 * the background transparent, and changes only the edge.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { createPipeline } from '../../src/pipeline/index.js';
import { FIXTURES } from '../helpers/cli.js';
import { dilate } from '../../src/pipeline/refine.js';

const pipeline = createPipeline();
t.teardown(() => pipeline.close());

const base = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false };

async function rawOf(png: Buffer, channels: number): Promise<Buffer> {
  const img = sharp(png);
  return (channels === 1 ? img.extractChannel(0) : img.removeAlpha()).raw().toBuffer();
}

t.test('decontamination removes the green fringe; refinement only touches edges', async (t) => {
  const photo = fs.readFileSync(path.join(FIXTURES, 'coffee.jpg'));
  const { data: rgb, info } = await sharp(photo).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const mask = await pipeline.removeBackground(photo, { ...base, mask: true });
  const alpha = await rawOf(mask.data, 1);
  const n = info.width * info.height;
  // I = a*F + (1-a)*green
  const comp = Buffer.alloc(n * 3);
  for (let i = 0; i < n; i++) {
    const a = alpha[i] / 255;
    comp[i * 3] = rgb[i * 3] * a;
    comp[i * 3 + 1] = rgb[i * 3 + 1] * a + 255 * (1 - a);
    comp[i * 3 + 2] = rgb[i * 3 + 2] * a;
  }
  const input = await sharp(comp, { raw: { width: info.width, height: info.height, channels: 3 } }).png().toBuffer();
  // The colours of the transparent cutout at the soft edge, against the true foreground colours.
  const withDecon = await rawOf((await pipeline.removeBackground(input, base)).data, 3);
  const without = await rawOf((await pipeline.removeBackground(input, { ...base, decontaminate: false })).data, 3);
  let errWith = 0, errWithout = 0, band = 0;
  for (let i = 0; i < n; i++) {
    if (alpha[i] < 20 || alpha[i] > 235) continue;
    band++;
    for (let c = 0; c < 3; c++) {
      errWith += Math.abs(withDecon[i * 3 + c] - rgb[i * 3 + c]);
      errWithout += Math.abs(without[i * 3 + c] - rgb[i * 3 + c]);
    }
  }
  t.ok(band > 500, `a soft band to look at (${band} px)`);
  t.ok(errWithout / band > 30, `without decontamination the edge colours carry the green (${(errWithout / band).toFixed(1)}, sum over RGB)`);
  t.ok(errWith < errWithout * 0.8, `decontamination brings them back toward the true colours (${(errWith / band).toFixed(1)} vs ${(errWithout / band).toFixed(1)})`);

  const refined = await rawOf((await pipeline.removeBackground(input, { ...base, mask: true })).data, 1);
  const plain = await rawOf((await pipeline.removeBackground(input, { ...base, mask: true, refine: false })).data, 1);
  // The edge: soft pixels of the plain matte and two pixels around them (the guided fit may
  // move an edge by a pixel of the model's grid).
  const soft = new Uint8Array(n);
  for (let i = 0; i < n; i++) soft[i] = plain[i] > 0 && plain[i] < 255 ? 1 : 0;
  const nearEdge = dilate(soft, info.width, info.height, 2);
  let interior = 0, interiorOpaque = 0, outside = 0, outsideClear = 0, changed = 0, changedAtEdge = 0;
  for (let i = 0; i < n; i++) {
    if (refined[i] !== plain[i]) {
      changed++;
      if (nearEdge[i]) changedAtEdge++;
    }
    if (alpha[i] === 255 && plain[i] === 255) { interior++; if (refined[i] > 240) interiorOpaque++; }
    if (alpha[i] === 0 && plain[i] === 0) { outside++; if (refined[i] < 15) outsideClear++; }
  }
  t.ok(interiorOpaque / interior > 0.99, `refined interior stays opaque (${interiorOpaque}/${interior})`);
  t.ok(outsideClear / outside > 0.99, `refined background stays transparent (${outsideClear}/${outside})`);
  t.ok(changed > 0 && changedAtEdge / changed > 0.8, `refinement changes pixels at the edge only (${changedAtEdge}/${changed})`);
});

t.test('--alpha hard gives a two-level matte', async (t) => {
  const photo = fs.readFileSync(path.join(FIXTURES, 'chelsea.jpg'));
  const hard = await rawOf((await pipeline.removeBackground(photo, { ...base, mask: true, alpha: 'hard' })).data, 1);
  const levels = new Set(hard);
  t.same([...levels].sort((a, b) => a - b), [0, 255]);
});
