/**
 * How far a quantized model's output is from fp32's, for the int8 sensitivity bench
 * (int8-sensitivity.ts): kept apart from the bench so that it can be tested without running it.
 */
import type { InputPlan } from '../dist/toolchain/variants.js';

/**
 * MAE and the share of pixels on the other side of 0.5 (what moves IoU) between two model outputs
 * laid out on the plan's grid, over its content box only: the letterbox's padding is no part of
 * the photo, and its near-zero values would dilute the error of a small photo.
 */
export function contentError(a: Float32Array, b: Float32Array, plan: InputPlan): { mae: number; flipped: number } {
  const { top, left, width, height } = plan.content;
  let sum = 0;
  let flipped = 0;
  for (let y = top; y < top + height; y++) {
    for (let x = left; x < left + width; x++) {
      const i = y * plan.width + x;
      sum += Math.abs(a[i] - b[i]);
      if (a[i] > 0.5 !== b[i] > 0.5) flipped++;
    }
  }
  const n = width * height;
  return { mae: sum / n, flipped: flipped / n };
}
