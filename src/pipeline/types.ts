/** The public types of the one core pipeline (src/pipeline/index.ts). */
import type { Margin, Position, Roi } from '../layout-options.js';
import type { Format, ImageOptions } from '../options.js';

/** An output encoding, or `raw`: 8-bit pixels (RGBA, or 1 channel for a mask), for a sharp chain. */
export type OutputFormat = Format | 'raw';
/**
 * What a request may ask for: an output encoding, remove.bg's `auto` (PNG when the result has
 * transparency, else JPG; PNG for the matte alone) or `zip` (color.jpg + alpha.png, stored).
 */
export type RequestFormat = OutputFormat | 'auto' | 'zip';
/** What a result is: `auto` resolved. */
export type ResultFormat = OutputFormat | 'zip';

/**
 * What the server and the job workers call: the pipeline's two entry points (the pipeline object
 * of index.ts; the server's metrics wrap it).
 */
export interface Pipeline {
  removeBackground(input: Buffer | RawPixels, req: RemoveRequest, opts?: { signal?: AbortSignal; afterModel?: () => void }): Promise<RemoveResult>;
  probeImage(bytes: Buffer): Promise<ImageProbe>;
}

/** An image's format, found from its bytes; `raw`: pixels a library caller passed as they are. */
export type InputFormat = 'jpeg' | 'png' | 'webp' | 'gif' | 'bmp' | 'tiff' | 'avif' | 'heic' | 'raw';

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
  format: RequestFormat;
  /** Overrides of the edge settings (edges.ts EDGE_PARAMS), for benchmarks that compare settings. */
  edgeParams?: Partial<import('./edges.js').EdgeParams>;
  /** Refuse `size=full` (after `auto` is resolved) above this many pixels: the sync route's 4 MP rule. */
  maxFullPixels?: number;
  /** Refuse an animation above this many frames x pixels (the sync route's bound: larger ones are jobs). */
  maxAnimationPixels?: number;
  /**
   * The output's largest area in pixels, aspect kept, never enlarged: remove.bg's sizes (preview
   * 0.25 MP, medium 1.5 MP, hd 4 MP, full 25 MP). A preview with it is sized by this area alone,
   * not by the 800 px side.
   */
  maxArea?: number;
  /** A background picture's encoded bytes (the door reads or fetches `bgImage`): centred, resized to cover the canvas. */
  bgImageData?: Buffer;
  /** With `crop`: a margin around the subject (layout-options.ts); the canvas may grow past the image. */
  cropMargin?: Margin;
  /** Only this rectangle of the input may hold foreground. */
  roi?: Roi;
  /** The subject's box fills this share (0.1 .. 1) of the canvas; undefined: its own size. */
  scale?: number;
  /** Where the subject goes on the canvas; `center` when only `scale` is given. */
  position?: Position;
}

export interface ImageProbe {
  format: InputFormat;
  /** Size after EXIF orientation. */
  width: number;
  height: number;
  /** Frames of an animated GIF, WebP or PNG (APNG); 1 for a still picture. */
  frames: number;
}

export interface StageTimings {
  decode: number;
  preprocess: number;
  inference: number;
  postprocess: number;
  encode: number;
  /** The confidence's signals (confidence.ts), part of postprocess: measured apart for its cost. */
  confidence: number;
}

export interface RemoveResult {
  data: Buffer;
  /** The encoding written (`auto` resolved to png or jpg). */
  format: ResultFormat;
  contentType: string;
  /** Channels of `data` when `format` is `raw` (4: RGBA; 1: a mask); else those of the decoded image. */
  channels: 1 | 3 | 4;
  width: number;
  height: number;
  /** The size actually produced: `auto` resolves to `preview` or `full`. Billing keys on this. */
  resolvedSize: 'preview' | 'full';
  /** The subject's box in the result, in its pixels (remove.bg's `foreground_*`); the whole result when none. */
  foreground: { left: number; top: number; width: number; height: number };
  input: ImageProbe;
  /** 0..1, 1: sure; ranks cutouts by how likely they are to be wrong (confidence.ts). An animation's is its lowest frame's. */
  confidence: number;
  /** Frames in the result: an animation cut out whole (`animation: keep`) has its input's count; else 1. */
  frames: number;
  ms: number;
  timings: StageTimings;
}
