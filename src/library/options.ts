/**
 * The library's options: the CLI's names (camelCase) and defaults, checked with the same parsers
 * as flags and API parameters, so a bad value gets the same message shape and `invalid_request`.
 */
import { DEFAULTS } from '../config.js';
import { CutoutError } from '../errors.js';
import * as internal from '../options.js';
import { checkImageOptions, LIBRARY_DEFAULTS, OPTION_TABLE, parseBoolean, parseEnum, PRECISIONS } from '../options.js';
import type { RemoveRequest } from '../pipeline/types.js';
import type { PreparationEvent } from '../toolchain/weights.js';

// The public types are spelled out here, so that the package's declarations stand on their own;
// the assertions below keep them equal to the internal ones they mirror.
/** `png`, `webp`, `jpg`, or `raw` (8-bit pixels). */
export type OutputFormat = 'png' | 'webp' | 'jpg' | 'gif' | 'raw';
/** `preview`, `full` or `auto`. */
export type Size = 'preview' | 'full' | 'auto';
/** `fast`, `balanced`, `best` or `max`. */
export type Quality = 'fast' | 'balanced' | 'best' | 'max';
/** `auto`, `fp32` or `int8`. */
export type Precision = 'auto' | 'fp32' | 'int8';
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const MIRRORED: [
  Same<OutputFormat, import('../pipeline/types.js').OutputFormat>,
  Same<Size, internal.Size>,
  Same<Quality, internal.Quality>,
  Same<Precision, internal.Precision>,
] = [true, true, true, true];
void MIRRORED;

/** Options of one call; all optional, with the CLI's defaults. */
export interface RemoveOptions {
  /**
   * `png` (default), `webp`, `jpg`, `gif` (1-bit alpha), `raw`: 8-bit RGBA pixels (1 channel with
   * `mask`), for a sharp chain; an animated input is written as animated WebP when no format is
   * given, and `webp`, `gif` and `png` (APNG) keep its animation; `auto`: PNG when the result has transparency, else JPEG; `zip`: remove.bg's archive of
   * `color.jpg` and `alpha.png`.
   */
  format?: OutputFormat | 'auto' | 'zip';
  /** `full` (default: native resolution), `preview` (longest side at most 800 px) or `auto` (full up to 4 MP). */
  size?: Size;
  /** `transparent` (default) or a hex colour such as `#ffffff` or `0f0`. */
  bgColor?: string;
  /** Crop to the subject's bounding box. */
  crop?: boolean;
  /** The alpha matte alone (greyscale) instead of the cutout. */
  mask?: boolean;
  /** `soft` (default) or `hard`: the matte thresholded at 50 % (stickers, icons). */
  alpha?: 'soft' | 'hard';
  /** Speed against quality: `fast`, `balanced`, `best` (default) or `max`. */
  quality?: Quality;
  /** Guided refinement of the matte at full resolution (default on). */
  refine?: boolean;
  /** Foreground colour estimation at soft edges (default on). */
  decontaminate?: boolean;
  /** With `crop`: a margin of 1, 2 or 4 lengths in px or % of the subject (`20px`, `10%`, `10px 20px`); the canvas may grow past the photo. */
  cropMargin?: string;
  /** Only this rectangle `x1 y1 x2 y2` (px or % of the photo) may hold the subject. */
  roi?: string;
  /** The subject fills this share of the canvas, `10%` to `100%`, or `original` (default); implies `position: 'center'`. */
  scale?: string;
  /** `original` (default), `center`, or 1 or 2 percentages (`50% 100%`). */
  position?: string;
  /** A background picture: a file path or an http(s) URL, centred and resized to cover the result. */
  bgImage?: string;
  // Product photos (docs/product-photos.md).
  /** `'auto'`: an input with transparency keeps its own alpha as the matte, without the model; `'never'` (default): the model always runs. */
  keepAlpha?: 'never' | 'auto';
  /** The canvas: `'1000x1000'` (exact size), `'original'` (the photo's size) or `'subject'` (the subject's box with its padding). */
  canvas?: string;
  /** Bound the width of an `original` or `subject` canvas, in pixels. */
  maxWidth?: number;
  /** Bound the height of an `original` or `subject` canvas, in pixels. */
  maxHeight?: number;
  /** Space between the subject and the canvas: 1 to 4 values (CSS order), each `NNpx`, `NN%` or a ratio 0 to 0.49 (`'10%'`, `'0.1'`, `'40px 5%'`). */
  padding?: string;
  /** Space inside the canvas's edge that cropped sides do not ignore; the same forms as `padding`. */
  margin?: string;
  /** `center` (default), `top`, `bottom`, `left`, `right`, or two words such as `'bottom left'`. */
  align?: string;
  /** `fit` (default: the whole subject inside the canvas less padding) or `fill` (it covers that room, cut where it overflows). */
  scaling?: 'fit' | 'fill';
  /** `true` (default): a side of the subject cut by the photo's edge ignores padding and touches the canvas. */
  snapCropped?: boolean;
  /** A sticker outline: `'8px'` or a ratio of the canvas's long side up to 0.1. */
  outlineWidth?: string;
  /** The outline's colour (default white). */
  outlineColor?: string;
  /** The outline's blur (a glow), a ratio of the long side from 0 to 0.025. */
  outlineBlur?: number;
  /** A shadow under the subject: `'none'`, `'drop'`, `'float'` or `'cast'`; `true` is `'float'` (remove.bg's `add_shadow`). */
  shadow?: boolean | 'none' | 'drop' | 'float' | 'cast';
  /** The shadow's opacity, 0 to 1 (default 0.5). */
  shadowOpacity?: number;
  /** The shadow's blur, 0 (hard) to 1 (soft) (default 0.5). */
  shadowSoftness?: number;
  /** Where the light comes from, degrees clockwise from above (default 0: the shadow falls below). */
  shadowDirection?: number;
  /** `cast`: the light's elevation above the floor, 5 to 85 degrees (default 45). */
  shadowElevation?: number;
  /** The shadow's colour (default black). */
  shadowColor?: string;
  /** The photo's own background, blurred: `true` (radius 0.01) or the radius as a ratio of the long side, up to 0.05. */
  bgBlur?: boolean | number;
  /** `gaussian` (default) or `bokeh`. */
  bgBlurMode?: 'gaussian' | 'bokeh';
  /** Pixel density written into a PNG or JPEG, 72 to 1200. */
  dpi?: number;
  /** Keep the input's EXIF (orientation reset to upright), XMP and RGB colour profile (default: stripped, sRGB). */
  keepMetadata?: boolean;
  /** An animated GIF, WebP or PNG: `keep` (default) cuts out every frame, `first` the first frame only. */
  animation?: 'keep' | 'first';
  /** Aborts the call: it rejects with an AbortError; a model run in flight finishes and its result is dropped. */
  signal?: AbortSignal;
}

/** Options of a remover. */
export interface RemoverOptions {
  /** A model from `cutout models list`, or an .onnx file with its manifest beside it; default `isnet-medium`. */
  model?: string;
  /** `auto` (default: int8 where the CPU runs it fast and its quality holds), `fp32` or `int8`. */
  precision?: Precision;
  /** Run the model on an Open Inference Protocol v2 server (Triton, KServe, `cutout model-server`) at this URL. */
  upstream?: string;
  /** The model's name on the upstream; default: the local model's name. */
  upstreamModel?: string;
  /** Sent as `Authorization: Bearer TOKEN` to the upstream. */
  upstreamToken?: string;
  /** Images in flight at once (default: the CLI's, 2 per inference worker on two cores or more). */
  concurrency?: number;
  /** Where the model cache goes when the package's own folder is read-only; default `$CUTOUT_HOME` or `~/.cutout`. */
  dataDir?: string;
  /** Load the model now rather than on the first image (a server's start, a warm-up). */
  preload?: boolean;
  /** Told when the model's files are built before their first use (a first run after install): nothing is downloaded. */
  onProgress?: (event: PreparationEvent) => void;
}

/** The per-call options: the image options the table gives the library, and the abort signal. */
const LIBRARY_ROWS = OPTION_TABLE.filter((r) => r.library !== false);
const REMOVE_KEYS = new Set<string>([...LIBRARY_ROWS.map((r) => r.key), 'signal']);
const REMOVER_KEYS = new Set(['model', 'precision', 'upstream', 'upstreamModel', 'upstreamToken', 'concurrency', 'dataDir', 'preload', 'onProgress']);

function refuseUnknown(options: object, known: Set<string>, what: string): void {
  const unknown = Object.keys(options).filter((k) => !known.has(k) && (options as Record<string, unknown>)[k] !== undefined);
  if (unknown.length) throw new CutoutError('invalid_request', `Unknown ${what} option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; known: ${[...known].join(', ')}`);
}

/** A call's options as the pipeline's request (the table's library defaults); throws invalid_request naming the option. */
export function removeRequest(options: RemoveOptions = {}): RemoveRequest {
  if (typeof options !== 'object' || options === null) throw new CutoutError('invalid_request', 'Expected an options object');
  refuseUnknown(options, REMOVE_KEYS, 'remove');
  const o = options as Record<string, unknown>;
  const out: Record<string, unknown> = { ...LIBRARY_DEFAULTS };
  for (const r of LIBRARY_ROWS) {
    const value = o[r.key];
    if (value === undefined) continue;
    // The library names an option by its key (`bgColor`), as the caller wrote it.
    const parse = r.library !== false && r.library.parse ? r.library.parse : (v: unknown, name: string) => r.parse(v, name, 'api');
    const parsed = parse(value, r.key);
    // null: the value means what absent means (`snapCropped: true`, `bgBlur: false`).
    if (parsed !== null) out[r.key] = parsed;
  }
  if (o.format === undefined) out.formatByDefault = true;
  return checkImageOptions(out as unknown as RemoveRequest, 'library');
}

export interface CheckedRemoverOptions {
  model?: string;
  precision: Precision;
  upstream?: string;
  upstreamModel?: string;
  upstreamToken?: string;
  concurrency: number;
  dataDir?: string;
  preload: boolean;
  onProgress?: (event: PreparationEvent) => void;
}

function optionalString(name: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw new CutoutError('invalid_request', `Expected a non-empty string for ${name} but received ${JSON.stringify(value)}`);
  return value;
}

export function checkRemoverOptions(options: RemoverOptions = {}): CheckedRemoverOptions {
  if (typeof options !== 'object' || options === null) throw new CutoutError('invalid_request', 'Expected an options object');
  refuseUnknown(options, REMOVER_KEYS, 'createRemover');
  const o = options as Record<string, unknown>;
  const concurrency = o.concurrency === undefined ? DEFAULTS.concurrency : Number(o.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) {
    throw new CutoutError('invalid_request', `Expected an integer from 1 to 64 for concurrency but received ${JSON.stringify(o.concurrency)}`);
  }
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') throw new CutoutError('invalid_request', 'Expected a function for onProgress');
  return {
    model: optionalString('model', o.model),
    precision: o.precision === undefined ? 'auto' : parseEnum('precision', PRECISIONS, o.precision, 'api'),
    upstream: optionalString('upstream', o.upstream),
    upstreamModel: optionalString('upstreamModel', o.upstreamModel),
    upstreamToken: optionalString('upstreamToken', o.upstreamToken),
    concurrency,
    dataDir: optionalString('dataDir', o.dataDir),
    preload: o.preload === undefined ? false : parseBoolean('preload', o.preload, 'api'),
    onProgress: o.onProgress as CheckedRemoverOptions['onProgress'],
  };
}
