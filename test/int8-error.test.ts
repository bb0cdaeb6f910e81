/**
 * The int8 sensitivity bench's error measure (bench/int8-error.ts): only the letterbox's
 * content counts, and a flip is a pixel on the other side of 0.5.
 */
import t from 'tap';
import { contentError } from '../bench/int8-error.js';
import type { InputPlan } from '../src/toolchain/variants.js';

t.test('contentError: MAE and flips over the content box only', async (t) => {
  // A 4 x 4 grid whose content is the middle 2 x 2 (rows and columns 1-2).
  const plan: InputPlan = { width: 4, height: 4, content: { left: 1, top: 1, width: 2, height: 2 }, pad: 'grey' };
  const ref = new Float32Array(16).fill(0.9);
  const out = new Float32Array(16).fill(0.9);
  out[0] = 0; // padding: ignored
  out[15] = 0; // padding: ignored
  t.same(contentError(out, ref, plan), { mae: 0, flipped: 0 }, 'differences in the padding do not count');
  out[1 * 4 + 1] = 0.1; // content, across 0.5: 0.8 off
  out[2 * 4 + 2] = 0.7; // content, same side: 0.2 off
  const e = contentError(out, ref, plan);
  t.ok(Math.abs(e.mae - (0.8 + 0.2) / 4) < 1e-6, `mean over the 4 content pixels: ${e.mae}`);
  t.equal(e.flipped, 1 / 4, 'one of the four content pixels crossed 0.5');
});
