/** The public types of the one core pipeline (src/pipeline/index.ts). */
import type { Format, ImageOptions } from '../options.js';

/** What the server and the job workers call: the pipeline's two entry points (tests may pass their own). */
export type Pipeline = Pick<typeof import('./index.js'), 'removeBackground' | 'probeImage'>;

export type InputFormat = 'jpeg' | 'png' | 'webp' | 'gif' | 'bmp' | 'tiff';

export interface RemoveRequest extends ImageOptions {
  /** Write the alpha matte alone (greyscale) instead of the cutout. */
  mask?: boolean;
  /** Model manifest name or path to an .onnx file; default: the configured default model. */
  model?: string;
  /** Guided refinement of the matte at full resolution (default on). */
  refine?: boolean;
  /** Foreground colour estimation at soft edges (default on). */
  decontaminate?: boolean;
  /** `hard`: threshold the matte at 50 % (stickers, icons); default `soft`. */
  alpha?: 'soft' | 'hard';
  /** Refuse `size=full` (after `auto` is resolved) above this many pixels: the sync route's 4 MP rule. */
  maxFullPixels?: number;
}

export interface ImageProbe {
  format: InputFormat;
  /** Size after EXIF orientation. */
  width: number;
  height: number;
}

export interface StageTimings {
  decode: number;
  preprocess: number;
  inference: number;
  postprocess: number;
  encode: number;
}

export interface RemoveResult {
  data: Buffer;
  format: Format;
  contentType: string;
  width: number;
  height: number;
  /** The size actually produced: `auto` resolves to `preview` or `full`. Billing keys on this. */
  resolvedSize: 'preview' | 'full';
  input: ImageProbe;
  ms: number;
  timings: StageTimings;
}
