#!/usr/bin/env node
/**
 * Renders the gallery of docs/product-photos.md from the test fixtures with cutout's built
 * library (run `npm run build` first): each picture through the options it shows, written as a
 * small JPEG (320 px wide) into docs/gallery/. `node scripts/gallery.mjs` rewrites them all.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { createRemover } from '../dist/index.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const sharp = createRequire(import.meta.url)('sharp');
const FIXTURES = path.join(ROOT, 'test', 'fixtures');
const OUT = path.join(ROOT, 'docs', 'gallery');
const WIDTH = 320;

/** name, fixture, options (null: the photo itself). */
const PICTURES = [
  ['cup-photo', 'coffee.jpg', null],
  ['cup-canvas', 'coffee.jpg', { canvas: '1000x1000', padding: '10%', bgColor: 'white' }],
  ['cup-drop', 'coffee.jpg', { canvas: '1000x1000', padding: '10%', bgColor: 'white', shadow: 'drop' }],
  ['cup-float', 'coffee.jpg', { canvas: '1000x1000', padding: '12%', bgColor: 'white', shadow: 'float' }],
  ['cup-cast', 'coffee.jpg', { canvas: '1000x1000', padding: '10% 10% 14% 18%', bgColor: '#f2f2f2', shadow: 'cast', shadowDirection: 60, shadowElevation: 35 }],
  ['cup-outline', 'coffee.jpg', { canvas: '1000x1000', padding: '10%', bgColor: '#4a90d9', outlineWidth: '14px', shadow: 'drop', shadowOpacity: 0.35 }],
  ['cat-photo', 'chelsea.jpg', null],
  ['cat-blur', 'chelsea.jpg', { bgBlur: 0.02 }],
  ['cat-bokeh', 'chelsea.jpg', { bgBlur: 0.03, bgBlurMode: 'bokeh' }],
  ['portrait-photo', 'astronaut.jpg', null],
  ['portrait-snap', 'astronaut.jpg', { canvas: '1000x1000', padding: '10%', bgColor: '#e8e4dc' }],
  ['portrait-nosnap', 'astronaut.jpg', { canvas: '1000x1000', padding: '10%', bgColor: '#e8e4dc', snapCropped: false }],
];

await fs.mkdir(OUT, { recursive: true });
const remover = await createRemover();
try {
  for (const [name, fixture, options] of PICTURES) {
    const input = await fs.readFile(path.join(FIXTURES, fixture));
    const image = options ? (await remover.remove(input, { format: 'png', ...options })).data : input;
    const jpg = await sharp(image).flatten({ background: '#ffffff' }).resize({ width: WIDTH }).jpeg({ quality: 78, mozjpeg: true }).toBuffer();
    await fs.writeFile(path.join(OUT, `${name}.jpg`), jpg);
    console.log(`docs/gallery/${name}.jpg  ${(jpg.length / 1000).toFixed(1)} kB`);
  }
} finally {
  await remover.close();
}
