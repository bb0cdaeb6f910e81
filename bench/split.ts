/**
 * `npm run bench -- --split [DIR]` (speed.ts hands it here): the inference split on this machine,
 * one worker with every core against one worker per core, in one run. Each pass puts every image of
 * the folder (three copies) through a pipeline of that split at concurrency 2 x workers; passes
 * alternate three times (the order swapped each time) and the medians are compared.
 * `--memory`: peak RSS of a pipeline with one worker and with two, after one image each, in fresh
 * processes: what one more worker (its own session and arena) costs.
 */
import fs from 'node:fs';
import os from 'node:os';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pLimit from 'p-limit';
import { createPipeline } from '../dist/pipeline/index.js';
import { runningInferenceThreads } from '../dist/pipeline/inference-thread.js';

const REQUEST = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false };

async function pass(buffers: Buffer[], workers: number, threads: number, model: string): Promise<number> {
  const pipeline = createPipeline({ model, inferenceWorkers: workers, threads });
  try {
    await pipeline.loadModel();
    // One untimed image per worker: sessions warm, V8's first compilation out of the way.
    await Promise.all(Array.from({ length: workers }, () => pipeline.removeBackground(buffers[0], REQUEST)));
    const limit = pLimit(2 * workers);
    const t = performance.now();
    await Promise.all(buffers.map((b) => limit(() => pipeline.removeBackground(b, REQUEST))));
    return buffers.length / ((performance.now() - t) / 1000);
  } finally {
    await pipeline.close();
  }
}

export async function benchSplit(files: string[], model: string): Promise<{ text: string; json: Record<string, unknown> }> {
  const cores = os.availableParallelism?.() ?? os.cpus().length;
  const buffers = [...files, ...files, ...files].map((f) => fs.readFileSync(f));
  const splits: [number, number][] = [[1, cores], [cores, 1]];
  const samples = new Map<string, number[]>(splits.map(([w, t]) => [`${w}x${t}`, []]));
  for (let rep = 0; rep < 3; rep++) {
    for (const [w, t] of rep % 2 ? [...splits].reverse() : splits) samples.get(`${w}x${t}`)!.push(await pass(buffers, w, t, model));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const rows = [...samples.entries()].map(([split, xs]) => ({ split, img_per_s: +median(xs).toFixed(3), passes: xs.map((x) => +x.toFixed(3)) }));
  const text = `inference split (workers x threads), ${buffers.length} images per pass, 3 alternated passes:\n${rows.map((r) => `  ${r.split}: ${r.img_per_s} img/s (passes ${r.passes.join(', ')})`).join('\n')}\n  ${rows[1].split} / ${rows[0].split} = ${(rows[1].img_per_s / rows[0].img_per_s).toFixed(3)}\n`;
  return { text, json: { cores, rows, ratio: +(rows[1].img_per_s / rows[0].img_per_s).toFixed(3) } };
}

/** Child: one pipeline of `workers` workers, one image per worker, then its peak RSS. */
export async function memoryChild(file: string, workers: number, model: string): Promise<void> {
  const pipeline = createPipeline({ model, inferenceWorkers: workers, threads: 1, precision: 'fp32' });
  const bytes = fs.readFileSync(file);
  await Promise.all(Array.from({ length: workers }, () => pipeline.removeBackground(bytes, REQUEST)));
  const threads = runningInferenceThreads();
  process.stdout.write(JSON.stringify({ workers, threads, peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024) }) + '\n');
  await pipeline.close();
}

export function benchSplitMemory(file: string, model: string): { text: string; json: Record<string, unknown> } {
  const self = fileURLToPath(new URL('./speed.js', import.meta.url));
  const rows = [1, 2].map((workers) => {
    const child = spawnSync(process.execPath, [self, '--split-memory-child', file, String(workers), '--model', model], { encoding: 'utf8' });
    if (child.status !== 0) throw new Error(`memory child failed: ${child.stderr}`);
    return JSON.parse(child.stdout.trim().split('\n').pop()!) as { workers: number; threads: number; peak_rss_mb: number };
  });
  const extra = rows[1].peak_rss_mb - rows[0].peak_rss_mb;
  return {
    text: `memory per inference worker (fp32, one image each): 1 worker ${rows[0].peak_rss_mb} MB, 2 workers ${rows[1].peak_rss_mb} MB peak RSS: ${extra} MB per extra worker (threads running: ${rows[0].threads}, ${rows[1].threads})\n`,
    json: { rows, extra_mb: extra },
  };
}
