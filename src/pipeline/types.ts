/** The public types of the one core pipeline (src/pipeline/index.ts). */
import type { Format, ImageOptions } from '../options.js';

/** An output encoding, or `raw`: 8-bit pixels (RGBA, or 1 channel for a mask), for a sharp chain. */
export type OutputFormat = Format | 'raw';

/**
 * What the server and the job workers call: the pipeline's two entry points (the pipeline object
 * of index.ts; the server's metrics wrap it).
 */
export interface Pipeline {
  removeBackground(input: Buffer | RawPixels, req: RemoveRequest, opts?: { signal?: AbortSignal; afterModel?: () => void }): Promise<RemoveResult>;
  probeImage(bytes: Buffer): Promise<ImageProbe>;
}

/** An image's format, found from its bytes; `raw`: pixels a library caller passed as they are. */
export type InputFormat = 'jpeg' | 'png' | 'webp' | 'gif' | 'bmp' | 'tiff' | 'raw';

/** Decoded pixels: 8-bit, interleaved, `channels` per pixel, row after row. */
export interface RawPixels {
  data: Uint8Array | Uint8ClampedArray;
  width: number;
  height: number;
  channels: 3 | 4;
}

/**
 * What the pipeline runs: the one request type of the front doors (ImageOptions, every image
 * option of src/options.ts's table) with `raw` as an output format, and two knobs of its own.
 */
export interface RemoveRequest extends Omit<ImageOptions, 'format'> {
  format: OutputFormat;
  /** Overrides of the edge settings (edges.ts EDGE_PARAMS), for benchmarks that compare settings. */
  edgeParams?: Partial<import('./edges.js').EdgeParams>;
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
  format: OutputFormat;
  contentType: string;
  /** Channels of `data` when `format` is `raw` (4: RGBA; 1: a mask); else those of the decoded image. */
  channels: 1 | 3 | 4;
  width: number;
  height: number;
  /** The size actually produced: `auto` resolves to `preview` or `full`. Billing keys on this. */
  resolvedSize: 'preview' | 'full';
  input: ImageProbe;
  ms: number;
  timings: StageTimings;
}
