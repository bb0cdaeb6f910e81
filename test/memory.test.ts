import t from 'tap';
import { collectGarbage } from '../src/pipeline/memory.js';

t.test('collectGarbage runs a real collection without --expose-gc', async (t) => {
  t.equal(typeof (globalThis as { gc?: unknown }).gc, 'undefined', 'tap runs the test without a global gc');
  let big: Uint8Array | null = new Uint8Array(64 * 1024 * 1024);
  const ref = new WeakRef(big);
  big = null;
  // A WeakRef's target lives at least until the end of the current job.
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(collectGarbage(), true, 'a collector is available');
  t.equal(ref.deref(), undefined, 'the unreachable buffer is gone');
  t.equal(collectGarbage(), true, 'and stays available');
});

t.test('the full-size decode overlaps the model run at every size unless fp32 weights run here', async (t) => {
  const { decodeOverlapMaxPixels } = await import('../src/pipeline/process.js');
  t.equal(decodeOverlapMaxPixels('fp32'), 16_000_000, 'fp32 in this process: up to 16 MP, the 50 MP decode waits');
  t.ok(decodeOverlapMaxPixels('int8') > 50_000_000, 'int8 in this process: a 50 MP image overlaps too');
  t.ok(decodeOverlapMaxPixels(null) > 50_000_000, 'a model run elsewhere holds no memory here');
});

t.test('the model seam says which weights a call runs in this process', async (t) => {
  const { LocalInference, UpstreamModelCall } = await import('../src/pipeline/model.js');
  const { resolveModel } = await import('../src/toolchain/manifest.js');
  const manifest = resolveModel('isnet-medium');
  const local = new LocalInference();
  const remote = new UpstreamModelCall({ precision: 'int8', run: async () => { throw new Error('not called'); } });
  try {
    t.equal(local.weightsHere(manifest, 1024, 'int8'), 'int8');
    t.equal(local.weightsHere(manifest, 1024, 'fp32'), 'fp32');
    t.equal(remote.weightsHere(), null, 'upstream: nothing runs here');
  } finally {
    await local.close();
    await remote.close();
  }
});

t.test('the CPU arena: off for very large images at fp32 only, and CUTOUT_ARENA forces it', async (t) => {
  const { arenaFor } = await import('../src/pipeline/model.js');
  const saved = process.env.CUTOUT_ARENA;
  t.teardown(() => {
    if (saved === undefined) delete process.env.CUTOUT_ARENA;
    else process.env.CUTOUT_ARENA = saved;
  });
  delete process.env.CUTOUT_ARENA;
  t.equal(arenaFor(1_000_000, 'fp32'), true, 'a photo at fp32: on');
  t.equal(arenaFor(50_000_000, 'fp32'), false, '50 MP at fp32: off (its arena beside the pixels went over 1.5 GB)');
  t.equal(arenaFor(50_000_000, 'int8'), true, '50 MP at int8: on (about half the arena)');
  process.env.CUTOUT_ARENA = '0';
  t.equal(arenaFor(1_000_000, 'int8'), false, 'CUTOUT_ARENA=0 turns it off');
  process.env.CUTOUT_ARENA = '1';
  t.equal(arenaFor(50_000_000, 'fp32'), true, 'CUTOUT_ARENA=1 turns it on');
});
