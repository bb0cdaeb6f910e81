/**
 * The inference split (issue 27): the default rule as a pure function, and a pipeline with two
 * workers on the real model, whose images go to both threads and equal a one-worker pipeline's.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { CORES_PER_WORKER, inferenceSplit } from '../../src/pipeline/inference-split.js';
import { runningInferenceThreads } from '../../src/pipeline/inference-thread.js';
import { createPipeline } from '../../src/pipeline/index.js';
import { loadConfig } from '../../src/config.js';
import { FIXTURES } from '../helpers/cli.js';

const GB = 1e9;

t.test('the rule: one worker up to 8 cores, then one per 8, within a quarter of the memory', async (t) => {
  t.equal(CORES_PER_WORKER, 8);
  t.same(inferenceSplit(1, 4 * GB), { workers: 1, threads: 1 });
  t.same(inferenceSplit(2, 24 * GB), { workers: 1, threads: 2 }, 'this machine');
  t.same(inferenceSplit(8, 32 * GB), { workers: 1, threads: 8 });
  t.same(inferenceSplit(16, 64 * GB), { workers: 2, threads: 8 });
  t.same(inferenceSplit(32, 128 * GB), { workers: 4, threads: 8 });
  t.same(inferenceSplit(64, 256 * GB), { workers: 8, threads: 8 });
  t.same(inferenceSplit(64, 4 * GB, 700e6), { workers: 1, threads: 64 }, 'memory for one session only: one worker');
  t.same(inferenceSplit(24, 8 * GB, 700e6), { workers: 2, threads: 12 }, 'memory caps the workers; threads take the rest of the cores');
});

t.test('config: the rule is the default; flags and the config file set it', async (t) => {
  const defaults = await loadConfig({}, { env: {} });
  t.ok(defaults.inferenceWorkers >= 1 && defaults.inferenceThreads >= 1);
  const set = await loadConfig({ inferenceWorkers: '2', inferenceThreads: '1' }, { env: {} });
  t.same([set.inferenceWorkers, set.inferenceThreads], [2, 1]);
  await t.rejects(loadConfig({ inferenceWorkers: '0' }, { env: {} }), /inferenceWorkers/);
});

t.test('two workers: both threads run, results equal one worker\'s', async (t) => {
  const photo = fs.readFileSync(path.join(FIXTURES, 'coffee.jpg'));
  const request = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false, precision: 'fp32' as const };
  const one = createPipeline({ inferenceWorkers: 1, threads: 1 });
  const reference = await sharp((await one.removeBackground(photo, request)).data).raw().toBuffer();
  await one.close();
  const two = createPipeline({ inferenceWorkers: 2, threads: 1 });
  t.teardown(() => two.close());
  const before = runningInferenceThreads();
  const results = await Promise.all([0, 1, 2, 3].map(() => two.removeBackground(photo, request)));
  t.equal(runningInferenceThreads() - before, 2, 'two worker threads started');
  for (const r of results) {
    const pixels = await sharp(r.data).raw().toBuffer();
    let far = 0;
    for (let i = 3; i < pixels.length; i += 4) if (Math.abs(pixels[i] - reference[i]) > 2) far++;
    t.equal(far, 0, 'alpha within 2 of the one-worker result everywhere');
  }
});
