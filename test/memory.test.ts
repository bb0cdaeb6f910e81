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
