/**
 * `npm run bench:animation` (issue 55): animations cut out frame by frame, against the
 * frame-by-frame baseline (each frame a still through the same pipeline).
 *
 * 1. Quality: photos of the public composite set (../shared/quality, exact alpha) made into
 *    20-frame animations of 512x512: `pan`, the camera moving across the photo (the subject moves,
 *    everything changes), and `still`, the photo unchanged but for a red ball crossing a corner
 *    away from the subject. For each: the worst frame's IoU with the true alpha, and the flicker,
 *    the largest mean change of alpha over the subject's pixels between two frames (share of its
 *    range), for the animation and for the baseline.
 * 2. Cost: a 20-frame 512x512 animation against its twenty frames as separate stills (PNG in,
 *    PNG out), interleaved, after a warm-up; the medians and their ratio (the bar: 1.1).
 * 3. Batching: the model's graph with its batch dimension made free, run on batches of 1, 2 and 4
 *    frames of the default side: the time per frame of each.
 *
 * Flags: --photos N (4), --runs N (3), --quality Q (best), --batch-side S (1024), --parts
 * quality,cost,batch (all three).
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import sharp from 'sharp';
import { API_DEFAULTS, parseImageOptions } from '../dist/options.js';
import { createPipeline } from '../dist/pipeline/index.js';
import { arg, machine, median, ROOT } from './common.js';

const require = createRequire(import.meta.url);
const QUALITY_SET = path.join(ROOT, '..', 'shared', 'quality', 'public');
const SIDE = 512;
const FRAMES = 20;
const photos = Number(arg('photos', '4'));
const runs = Number(arg('runs', '3'));
const quality = arg('quality', 'best');
const batchSide = Number(arg('batch-side', '1024'));
const parts = new Set(arg('parts', 'quality,cost,batch').split(','));

interface Scene { frames: Buffer[]; truth: Uint8Array[] }

/** A photo and its alpha, covering SIDE*1.2 square (room to pan). */
async function photoOf(id: string, side: number) {
  const rgb = await sharp(path.join(QUALITY_SET, 'images', `${id}.jpg`)).resize(side, side, { fit: 'cover' }).removeAlpha().raw().toBuffer();
  const alpha = await sharp(path.join(QUALITY_SET, 'alpha', `${id}.png`)).resize(side, side, { fit: 'cover' }).extractChannel(0).raw().toBuffer();
  return { rgb, alpha, side };
}

function crop(src: Buffer, side: number, channels: number, left: number, top: number): Buffer {
  const out = Buffer.alloc(SIDE * SIDE * channels);
  for (let y = 0; y < SIDE; y++) src.copy(out, y * SIDE * channels, ((top + y) * side + left) * channels, ((top + y) * side + left + SIDE) * channels);
  return out;
}

async function panScene(id: string): Promise<Scene> {
  const p = await photoOf(id, Math.round(SIDE * 1.2));
  const room = p.side - SIDE;
  const frames: Buffer[] = [], truth: Uint8Array[] = [];
  for (let f = 0; f < FRAMES; f++) {
    const left = Math.round((room * f) / (FRAMES - 1)), top = Math.round(room / 2);
    frames.push(crop(p.rgb, p.side, 3, left, top));
    truth.push(new Uint8Array(crop(p.alpha, p.side, 1, left, top)));
  }
  return { frames, truth };
}

async function stillScene(id: string): Promise<Scene> {
  const p = await photoOf(id, SIDE);
  // The corner with the least subject in a 120 px square.
  const corners = [[0, 0], [SIDE - 120, 0], [0, SIDE - 120], [SIDE - 120, SIDE - 120]].map(([x0, y0]) => {
    let sum = 0;
    for (let y = y0; y < y0 + 120; y++) for (let x = x0; x < x0 + 120; x++) sum += p.alpha[y * SIDE + x];
    return { x0, y0, sum };
  }).sort((a, b) => a.sum - b.sum);
  const { x0, y0 } = corners[0];
  const frames: Buffer[] = [];
  for (let f = 0; f < FRAMES; f++) {
    const frame = Buffer.from(p.rgb);
    const cx = x0 + 60 + Math.round(40 * Math.cos((2 * Math.PI * f) / FRAMES)), cy = y0 + 60 + Math.round(40 * Math.sin((2 * Math.PI * f) / FRAMES));
    for (let y = cy - 12; y <= cy + 12; y++) for (let x = cx - 12; x <= cx + 12; x++) {
      if ((x - cx) ** 2 + (y - cy) ** 2 <= 144 && p.alpha[y * SIDE + x] === 0) frame.set([220, 30, 30], (y * SIDE + x) * 3);
    }
    frames.push(frame);
  }
  return { frames, truth: frames.map(() => new Uint8Array(p.alpha)) };
}

const animated = (frames: Buffer[]) =>
  sharp(Buffer.concat(frames), { raw: { width: SIDE, height: SIDE * frames.length, channels: 3, pageHeight: SIDE } }).webp({ lossless: true, effort: 1, delay: frames.map(() => 100), loop: 0 }).toBuffer();
const still = (frame: Buffer) => sharp(frame, { raw: { width: SIDE, height: SIDE, channels: 3 } }).png({ compressionLevel: 1 }).toBuffer();

async function alphasOfAnimation(data: Buffer): Promise<Uint8Array[]> {
  const { data: a, info } = await sharp(data, { pages: -1 }).ensureAlpha().extractChannel(3).raw().toBuffer({ resolveWithObject: true });
  const n = info.height / SIDE;
  return Array.from({ length: n }, (_, i) => new Uint8Array(a.subarray(i * SIDE * SIDE, (i + 1) * SIDE * SIDE)));
}

function iou(a: Uint8Array, b: Uint8Array): number {
  let inter = 0, union = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] >= 128, y = b[i] >= 128;
    if (x && y) inter++;
    if (x || y) union++;
  }
  return union ? inter / union : 1;
}

function flicker(alphas: Uint8Array[], truth: Uint8Array[]): number {
  let worst = 0;
  for (let f = 1; f < alphas.length; f++) {
    let sum = 0, n = 0;
    for (let i = 0; i < truth[f].length; i++) if (truth[f][i] > 0 || truth[f - 1][i] > 0) { sum += Math.abs(alphas[f][i] - alphas[f - 1][i]); n++; }
    worst = Math.max(worst, n ? sum / n / 255 : 0);
  }
  return worst;
}

const request = (format: string) => parseImageOptions({ size: 'full', format, quality }, 'api', API_DEFAULTS);
const pipeline = createPipeline({});
await pipeline.loadModel();
console.log(machine());
console.log(`quality ${quality}, ${FRAMES} frames of ${SIDE}x${SIDE}`);

// 1. Quality.
const ids = (JSON.parse(fs.readFileSync(path.join(QUALITY_SET, 'manifest.json'), 'utf8')).images as { id: string; no_subject: boolean; fg_area_frac: number }[])
  .filter((i) => !i.no_subject && i.fg_area_frac > 0.08 && i.fg_area_frac < 0.35).slice(0, Math.max(1, photos)).map((i) => i.id);
if (parts.has('quality')) console.log('\nscene          | animation: worst IoU, flicker | stills: worst IoU, flicker');
for (const id of parts.has('quality') ? ids : []) {
  for (const [kind, make] of [['pan', panScene], ['still', stillScene]] as const) {
    const scene = await make(id);
    const anim = await alphasOfAnimation((await pipeline.removeBackground(await animated(scene.frames), request('webp'))).data);
    const base: Uint8Array[] = [];
    for (const frame of scene.frames) base.push(new Uint8Array(await sharp((await pipeline.removeBackground(await still(frame), request('png'))).data).ensureAlpha().extractChannel(3).raw().toBuffer()));
    const worst = (alphas: Uint8Array[]) => Math.min(...alphas.map((a, i) => iou(a, scene.truth[i]))).toFixed(3);
    const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
    console.log(`${id} ${kind.padEnd(5)} | ${worst(anim)}, ${pct(flicker(anim, scene.truth))} | ${worst(base)}, ${pct(flicker(base, scene.truth))}`);
  }
}

// 2. Cost: one 20-frame animation against twenty stills, interleaved.
const cost = await panScene(ids[0]);
const animation = await animated(cost.frames);
const stills = await Promise.all(cost.frames.map(still));
const times: Record<'animation' | 'stills', number[]> = { animation: [], stills: [] };
for (let r = parts.has('cost') ? -1 : runs; r < runs; r++) {
  let t = performance.now();
  await pipeline.removeBackground(animation, request('webp'));
  const a = performance.now() - t;
  t = performance.now();
  for (const s of stills) await pipeline.removeBackground(s, request('png'));
  const s = performance.now() - t;
  if (r < 0) continue;
  times.animation.push(a);
  times.stills.push(s);
}
await pipeline.close();
const [ma, ms] = [median(times.animation), median(times.stills)];
if (parts.has('cost')) console.log(`\ncost, median of ${runs}: animation ${ma.toFixed(0)} ms, twenty stills ${ms.toFixed(0)} ms, ratio ${(ma / ms).toFixed(3)} (bar 1.1)`);

// 3. Batching: the graph with a free batch dimension, on the same weights.
const weights = fs.readdirSync(path.join(ROOT, 'models', 'cache')).find((f) => batchSide === 1024 ? /\.o1\.fp16-to-fp32\.onnx$/.test(f) : f.endsWith(`.o1.side${batchSide}.onnx`));
if (!parts.has('batch')) {
  // not asked
} else if (!weights) {
  console.log(`\nbatching: no fp32 model of side ${batchSide} in models/cache (run a removal at that side first)`);
} else {
  const { onnx } = require('onnx-proto') as typeof import('onnx-proto');
  const model = onnx.ModelProto.decode(fs.readFileSync(path.join(ROOT, 'models', 'cache', weights)));
  for (const info of [...(model.graph!.input ?? []), ...(model.graph!.output ?? []), ...(model.graph!.valueInfo ?? [])]) {
    const dim = info.type?.tensorType?.shape?.dim?.[0];
    if (dim) Object.assign(dim, { dimValue: null, dimParam: 'N' });
  }
  const ort = require('onnxruntime-node') as typeof import('onnxruntime-node');
  const threads = Math.max(1, (await import('node:os')).availableParallelism());
  // Beside the original: its weights are an external file named relative to the graph's folder.
  const freed = path.join(ROOT, 'models', 'cache', `${weights}.batch-bench.onnx`);
  fs.writeFileSync(freed, onnx.ModelProto.encode(model).finish());
  const session = await ort.InferenceSession.create(freed, { intraOpNumThreads: threads, interOpNumThreads: 1 }).finally(() => fs.rmSync(freed, { force: true }));
  console.log(`\nbatching (${weights}, fp32, ${threads} threads):`);
  let single = 0;
  for (const n of [1, 2, 4]) {
    const x = new ort.Tensor('float32', new Float32Array(n * 3 * batchSide * batchSide).fill(0.1), [n, 3, batchSide, batchSide]);
    try {
      await session.run({ [session.inputNames[0]]: x });
      const per: number[] = [];
      for (let r = 0; r < runs; r++) {
        const t = performance.now();
        await session.run({ [session.inputNames[0]]: x });
        per.push((performance.now() - t) / n);
      }
      const m = median(per);
      if (n === 1) single = m;
      console.log(`  batch ${n}: ${m.toFixed(0)} ms a frame${n > 1 ? `, ${(m / single).toFixed(3)} of batch 1's` : ''}`);
    } catch (err) {
      console.log(`  batch ${n}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
}
