/**
 * `npm run bench:product`: what a product photo's layout costs (issue 54's bar: at 1000x1000 with
 * padding, a float shadow and an outline, a removal costs at most 15 % more than without). One
 * pipeline (the default model, precision auto), a 1000x1000 photo (a fixture resized to cover it),
 * removals with and without `canvas=1000x1000 padding=10% shadow=float outline_width=8px`
 * interleaved, after one warm-up each; the medians and their ratio, from one run.
 *
 * Flags: --runs N (7), --quality Q (best), --photo FILE (test/fixtures/coffee.jpg).
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { API_DEFAULTS, parseImageOptions } from '../dist/options.js';
import { createPipeline } from '../dist/pipeline/index.js';
import { arg, FIXTURES, machine, median } from './common.js';

const runs = Number(arg('runs', '7'));
const quality = arg('quality', 'best');
const photo = await sharp(fs.readFileSync(arg('photo', path.join(FIXTURES, 'coffee.jpg')))).resize(1000, 1000, { fit: 'cover' }).jpeg({ quality: 92 }).toBuffer();

const base = { size: 'full', format: 'png', quality };
const product = { ...base, canvas: '1000x1000', padding: '10%', shadow: 'float', outline_width: '8px', bg_color: 'white' };
const plain = { ...base, bg_color: 'white' };
const requestOf = (raw: Record<string, string>) => parseImageOptions(raw, 'api', API_DEFAULTS);

const pipeline = createPipeline({});
await pipeline.loadModel();
const times: Record<'plain' | 'product', number[]> = { plain: [], product: [] };
const composeTimes: Record<'plain' | 'product', number[]> = { plain: [], product: [] };
for (let i = -1; i < runs; i++) {
  for (const [name, raw] of [['plain', plain], ['product', product]] as const) {
    const started = performance.now();
    const result = await pipeline.removeBackground(photo, requestOf(raw));
    const ms = performance.now() - started;
    if (i < 0) continue; // warm-up
    times[name].push(ms);
    composeTimes[name].push(result.timings.encode);
  }
}
await pipeline.close();

const cpu = machine();
const ratio = median(times.product) / median(times.plain);
const row = (name: 'plain' | 'product') => `${name.padEnd(8)} median ${median(times[name]).toFixed(0)} ms (min ${Math.min(...times[name]).toFixed(0)}, max ${Math.max(...times[name]).toFixed(0)}); compose and encode ${median(composeTimes[name]).toFixed(0)} ms`;
process.stdout.write(`product photo at 1000x1000, quality ${quality}, ${runs} runs each, interleaved; ${cpu}\n${row('plain')}\n${row('product')}\nratio product / plain: ${ratio.toFixed(3)} (issue 54's bar: at most 1.15)\n`);
process.stdout.write(JSON.stringify({ bench: 'product', quality, runs, plain_ms: median(times.plain), product_ms: median(times.product), ratio: Number(ratio.toFixed(3)), cpu }) + '\n');
