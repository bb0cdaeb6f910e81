/**
 * One parser for the image options of api-spec 2.1 (size, format, bg_color, crop, type), used by
 * CLI flags and HTTP parameters alike. Messages follow one shape: "Expected X for Y but received Z".
 */
import { colorFromText, colorToText } from './colors.js';
import { CutoutError } from './errors.js';

export const SIZES = ['preview', 'full', 'auto'] as const;
export const FORMATS = ['png', 'webp', 'jpg'] as const;
export const TYPES = ['auto', 'person', 'product'] as const;
/** Speed against quality: the model's input side (src/pipeline/variants.ts maps names to sides). */
export const QUALITIES = ['fast', 'balanced', 'best', 'max'] as const;
/**
 * The model's number format (an addition to v1): `auto` picks int8 where the CPU runs it fast
 * and it passed the quality bar, else fp32 (src/pipeline/int8.ts).
 */
export const PRECISIONS = ['auto', 'fp32', 'int8'] as const;
/** Parameters of remove.bg that api-spec 2.1 rule 3 names as unsupported. */
export const UNSUPPORTED_PARAMS = ['channels', 'roi', 'scale', 'position', 'bg_image_url'] as const;

export type Size = (typeof SIZES)[number];
export type Format = (typeof FORMATS)[number];
export type SubjectType = (typeof TYPES)[number];
export type Quality = (typeof QUALITIES)[number];
export type Precision = (typeof PRECISIONS)[number];

/**
 * Refuses a precision the model call cannot give. int8 is the local model's alone: an upstream
 * inference server (`serve --upstream`) runs the weights it was given (the fp32 ones of an
 * exported Triton repository) and cannot switch per request. The sync route meets this in the
 * pipeline, the job routes at submission (a job must not be accepted to fail later), and
 * `serve` at start for its default precision.
 */
export function assertPrecisionServed(precision: Precision | undefined, inferenceUpstream: boolean): void {
  if (inferenceUpstream && precision === 'int8') {
    throw new CutoutError('invalid_request', 'precision=int8 is not available when inference runs on an upstream server; use auto or fp32');
  }
}
/** 8-bit channels; `a`, when present, is the colour's alpha (0..255; absent: opaque). */
export interface Rgb { r: number; g: number; b: number; a?: number }

export interface ImageOptions {
  size: Size;
  format: Format;
  /** null means transparent. */
  bgColor: Rgb | null;
  crop: boolean;
  /** A hint only; accepted for compatibility, it changes nothing. */
  type?: SubjectType;
  /** Speed against quality (an addition to v1); absent means `best`. */
  quality?: Quality;
  /** fp32 or int8 model (an addition to v1); absent means the configured default (`auto`). */
  precision?: Precision;
}

/** Where a value came from, for messages: a CLI flag (`--bg-color`) or an API parameter (`bg_color`). */
export type OptionSource = 'cli' | 'api';

export class OptionError extends CutoutError {
  /** Parameter name as the user wrote it. */
  readonly param: string;
  /**
   * A finer reason than `invalid_request` where one exists (`roi_exceeds_bounds`,
   * `roi_region_empty`, `failed_bg_download`, ...): the remove.bg dialect answers it as its code.
   */
  readonly reason?: string;
  constructor(param: string, message: string, reason?: string) {
    super('invalid_request', message);
    this.param = param;
    this.reason = reason;
  }
}

function label(param: string, source: OptionSource): string {
  return source === 'cli' ? `--${param.replace(/_/g, '-')}` : param;
}

function expected(param: string, source: OptionSource, what: string, got: unknown): OptionError {
  return new OptionError(param, `Expected ${what} for ${label(param, source)} but received ${JSON.stringify(got)}`);
}

export function parseEnum<T extends string>(param: string, allowed: readonly T[], value: unknown, source: OptionSource): T {
  const v = typeof value === 'string' ? value.trim().toLowerCase() : value;
  if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) return v as T;
  throw expected(param, source, `one of ${allowed.join(', ')}`, value);
}

/**
 * `transparent`, a hex colour of 3, 4, 6 or 8 digits with or without `#` (4 and 8 carry an
 * alpha), or a CSS colour name (src/colors.ts). A colour whose alpha is 0 is `transparent`.
 */
export function parseColor(value: unknown, source: OptionSource, param = 'bg_color'): Rgb | null {
  if (typeof value !== 'string') throw expected(param, source, 'transparent or a hex colour', value);
  const color = colorFromText(value);
  if (color === undefined) throw expected(param, source, 'transparent, a hex colour such as #ffffff, 0f0 or 81d4fa77, or a CSS colour name', value);
  return color;
}

export function parseBoolean(param: string, value: unknown, source: OptionSource): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string') {
    const v = value.trim().toLowerCase();
    if (v === 'true' || v === '1') return true;
    if (v === 'false' || v === '0') return false;
  }
  throw expected(param, source, 'true or false', value);
}

/** `#rrggbb` (`#rrggbbaa` when translucent) or `transparent`. */
export function colorToHex(c: Rgb | null): string {
  return colorToText(c);
}

/**
 * Parses raw option values (strings from a form or flags, or JSON values) into ImageOptions.
 * Missing values take the defaults given (the API and the CLI differ on `size`).
 */
export function parseImageOptions(
  raw: { size?: unknown; format?: unknown; bg_color?: unknown; crop?: unknown; type?: unknown; quality?: unknown; precision?: unknown },
  source: OptionSource,
  defaults: ImageOptions,
): ImageOptions {
  const out: ImageOptions = { ...defaults };
  if (raw.size !== undefined) out.size = parseEnum('size', SIZES, raw.size, source);
  if (raw.format !== undefined) out.format = parseFormat(raw.format, source);
  if (raw.bg_color !== undefined) out.bgColor = parseColor(raw.bg_color, source);
  if (raw.crop !== undefined) out.crop = parseBoolean('crop', raw.crop, source);
  if (raw.type !== undefined) out.type = parseEnum('type', TYPES, raw.type, source);
  if (raw.quality !== undefined) out.quality = parseEnum('quality', QUALITIES, raw.quality, source);
  if (raw.precision !== undefined) out.precision = parseEnum('precision', PRECISIONS, raw.precision, source);
  return out;
}

/** `jpeg` is accepted as a spelling of `jpg`. */
export function parseFormat(value: unknown, source: OptionSource): Format {
  const v = typeof value === 'string' && value.trim().toLowerCase() === 'jpeg' ? 'jpg' : value;
  return parseEnum('format', FORMATS, v, source);
}

/**
 * A test key runs the whole flow for free, so its results are previews whatever size was asked:
 * on the API and through `cutout --key` alike.
 */
export function forTestKey(options: ImageOptions, test: boolean): ImageOptions {
  return test ? { ...options, size: 'preview' } : options;
}

export const API_DEFAULTS: Readonly<ImageOptions> = Object.freeze({ size: 'preview', format: 'png', bgColor: null, crop: false });
export const CLI_DEFAULTS: Readonly<ImageOptions> = Object.freeze({ size: 'full', format: 'png', bgColor: null, crop: false });

export const CONTENT_TYPES: Readonly<Record<Format, string>> = Object.freeze({ png: 'image/png', webp: 'image/webp', jpg: 'image/jpeg' });
