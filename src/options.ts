/**
 * The image options: one request type (ImageOptions) and one table (OPTION_TABLE) that describes
 * each option once: its API parameter, CLI flag and library key, its parser, its default at each
 * front door, whether it changes the output, and its OpenAPI schema. The API's parameters
 * (server/v1-params.ts), the OpenAPI document, the CLI's image flags (commands/image-flags.ts) and
 * the library's options (library/options.ts) are read off the table. Messages follow one shape:
 * "Expected X for Y but received Z", naming the option as the door spells it.
 * docs/internals.md ("Adding an image option") says how to add a row.
 */
import { colorFromText, colorToText } from './colors.js';
import { CutoutError } from './errors.js';
import { createHash } from 'node:crypto';
import { lengthsToText, parseCropMargin, parsePosition, parseRoi, parseScale, type Margin, type Position, type Roi } from './layout-options.js';
import { OptionError, type OptionSource } from './option-error.js';
import { LIMITS } from './limits.js';

export const SIZES = ['preview', 'full', 'auto'] as const;
export const FORMATS = ['png', 'webp', 'jpg'] as const;
/**
 * What a request may ask for: an encoding, or remove.bg's `auto` (PNG when the result has
 * transparency, else JPEG) and `zip` (color.jpg + alpha.png, stored).
 */
export const IMAGE_FORMATS = [...FORMATS, 'auto', 'zip'] as const;
export const TYPES = ['auto', 'person', 'product'] as const;
/** Speed against quality: the model's input side (src/toolchain/variants.ts maps names to sides). */
export const QUALITIES = ['fast', 'balanced', 'best', 'max'] as const;
/**
 * The model's number format (an addition to v1): `auto` picks int8 where the CPU runs it fast
 * and it passed the quality bar, else fp32 (src/toolchain/int8.ts).
 */
export const PRECISIONS = ['auto', 'fp32', 'int8'] as const;
/** `hard`: the matte thresholded at 50 % (stickers, icons). */
export const ALPHAS = ['soft', 'hard'] as const;
/** Parameters of remove.bg that api-spec 2.1 rule 3 names as unsupported. */
export const UNSUPPORTED_PARAMS = ['channels'] as const;

export type Size = (typeof SIZES)[number];
export type Format = (typeof FORMATS)[number];
export type ImageFormat = (typeof IMAGE_FORMATS)[number];
export type SubjectType = (typeof TYPES)[number];
export type Quality = (typeof QUALITIES)[number];
export type Precision = (typeof PRECISIONS)[number];
export type Alpha = (typeof ALPHAS)[number];

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
  format: ImageFormat;
  /** null means transparent. */
  bgColor: Rgb | null;
  crop: boolean;
  /** A hint only; accepted for compatibility, it changes nothing. */
  type?: SubjectType;
  /** Speed against quality (an addition to v1); absent means `best`. */
  quality?: Quality;
  /** fp32 or int8 model (an addition to v1); absent means the configured default (`auto`). */
  precision?: Precision;
  /** Write the alpha matte alone (greyscale) instead of the cutout; absent means false. */
  mask?: boolean;
  /** `hard`: threshold the matte at 50 % (stickers, icons); absent means `soft`. */
  alpha?: Alpha;
  /** Guided refinement of the matte at full resolution; absent means on. */
  refine?: boolean;
  /** Foreground colour estimation at soft edges; absent means on. */
  decontaminate?: boolean;
  /** With `crop`: a margin around the subject (remove.bg's `crop_margin`); the canvas may grow past the image. */
  cropMargin?: Margin;
  /** Only this rectangle of the input may hold foreground (remove.bg's `roi`). */
  roi?: Roi;
  /** The subject's box fills this share (0.1 .. 1) of the canvas; absent: its own size. */
  scale?: number;
  /** Where the subject goes on the canvas; `center` when only `scale` is given. */
  position?: Position;
  /**
   * A background picture: an http(s) URL (fetched through the SSRF guard of `image_url`), or at
   * the CLI and in the library a file path too. The door reads it into the request's `bgImageData`.
   */
  bgImage?: string;
  /** A shadow under the subject: accepted and ignored (docs/removebg.md says why). */
  shadow?: boolean;
}

export { OptionError, type OptionSource } from './option-error.js';

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

/** `jpeg` is accepted as a spelling of `jpg`. */
export function parseFormat(value: unknown, source: OptionSource): ImageFormat {
  const v = typeof value === 'string' && value.trim().toLowerCase() === 'jpeg' ? 'jpg' : value;
  return parseEnum('format', IMAGE_FORMATS, v, source);
}

/**
 * A test key runs the whole flow for free, so its results are previews whatever size was asked:
 * on the API and through `cutout --key` alike.
 */
export function forTestKey(options: ImageOptions, test: boolean): ImageOptions {
  return test ? { ...options, size: 'preview' } : options;
}

export const CONTENT_TYPES: Readonly<Record<Format, string>> = Object.freeze({ png: 'image/png', webp: 'image/webp', jpg: 'image/jpeg' });

/** An OpenAPI schema fragment. */
type Schema = Record<string, unknown>;

const MP = (pixels: number): string => `${pixels / 1_000_000} MP`;

/** One image option, described once. */
export interface OptionRow<K extends keyof ImageOptions = keyof ImageOptions> {
  /** The field of ImageOptions; also the library's key and the CLI flag's attribute (commander camelCases). */
  key: K;
  /** The API parameter (snake_case), or null when HTTP does not take it. */
  api: string | null;
  /** The CLI flag as commander declares it (`--bg-color <color>`, `--crop`, `--no-refine`), or null. */
  flag: string | null;
  /** The flag's --help line. */
  help: string;
  /**
   * For the shell completions (completions/, regenerated from the table by `npm run completions`):
   * a short description, and what the flag's value completes to (fixed words, or a file). Null without a flag.
   */
  completion: { summary: string; values?: readonly string[] | 'file' } | null;
  /** Whether the library's RemoveOptions takes it; `parse` overrides the shared parser there. */
  library: false | { parse?: (value: unknown, name: string) => NonNullable<ImageOptions[K]> | null };
  /** The config key whose value is the CLI's default (`quality`, `precision`): the flag overrides it. */
  cliConfig?: 'quality' | 'precision';
  /** Parses a raw value (a form string, a JSON value, a flag); `param` names it in the message. */
  parse(value: unknown, param: string, source: OptionSource): ImageOptions[K];
  /** The value when absent, per front door; undefined: stays absent (the pipeline's default applies). */
  defaults: { api?: ImageOptions[K]; cli?: ImageOptions[K]; library?: ImageOptions[K] };
  /** False for a hint that is accepted and changes nothing (`type`). */
  changesOutput: boolean;
  /**
   * How a manifest line records an option that changes the output (commands/manifest.ts reads
   * every such row): under `name` (default: the API name, else the key), `absent` when the
   * request leaves it out (no `absent`: the option is left out of the line too, so a manifest
   * written before the option existed still matches), and the value `text` makes of it (default:
   * the value itself when it is a string, number or boolean, else its JSON).
   */
  record?: {
    name?: string;
    absent?: string | boolean | null;
    text?(value: NonNullable<ImageOptions[K]>, request: RecordedRequest): string | boolean;
  };
  /** The OpenAPI component (its name and schema) of the API parameter; `default` is added from `defaults.api`. */
  openapi: { name: string; schema: Schema } | null;
}

/** What a manifest's record of the options reads: the options, and the background picture's bytes. */
export type RecordedRequest = Readonly<Partial<Omit<ImageOptions, 'format'>> & { format?: string; bgImageData?: Buffer }>;

/** Keeps each row's key, parser and defaults of one type. */
function row<K extends keyof ImageOptions>(r: OptionRow<K>): OptionRow<K> {
  return r;
}

const enumOf = <T extends string>(allowed: readonly T[]) => (value: unknown, param: string, source: OptionSource): T => parseEnum(param, allowed, value, source);
const booleanOf = (value: unknown, param: string, source: OptionSource): boolean => parseBoolean(param, value, source);

/** Every image option, in the order messages and --help list them. Adding an option is adding a row. */
export const OPTION_TABLE: readonly OptionRow[] = Object.freeze([
  row({
    key: 'size', api: 'size', flag: '--size <size>', help: 'preview | full | auto (default: full)',
    completion: { summary: 'output size', values: SIZES },
    library: {}, parse: enumOf(SIZES), defaults: { api: 'preview', cli: 'full', library: 'full' }, changesOutput: true,
    openapi: {
      name: 'Size',
      schema: {
        type: 'string', enum: [...SIZES],
        description:
          `\`preview\`: free, longest side <= ${LIMITS.previewMaxSide} px. \`full\`: native resolution, 1 credit. ` +
          `\`auto\`: \`full\` up to ${MP(LIMITS.autoFullMaxPixels)}, else \`preview\`. ` +
          'Absent: `preview` (api-spec 2.1), whereas the command line (`cutout remove`) defaults to `full`. ' +
          '`POST /api/v1/remove` says which size it served in `X-Cutout-Size`.',
      },
    },
  }),
  row({
    key: 'format', api: 'format', flag: '--format <format>', help: 'png | webp | jpg | auto | zip: auto is PNG with transparency, else JPEG; zip holds color.jpg and alpha.png (default: png, or from --out FILE)',
    completion: { summary: 'output encoding', values: IMAGE_FORMATS },
    // The library also gives `raw` (8-bit pixels for a sharp chain): RemoveRequest's format.
    library: { parse: (value, name) => (value === 'jpeg' ? 'jpg' : parseEnum(name, [...IMAGE_FORMATS, 'raw'] as const, value, 'api') as ImageFormat) },
    parse: (value, _param, source) => parseFormat(value, source), defaults: { api: 'png', cli: 'png', library: 'png' }, changesOutput: true,
    openapi: {
      name: 'Format',
      schema: {
        type: 'string', enum: [...IMAGE_FORMATS],
        description: 'Output encoding. `jpg` has no alpha: combine it with `bg_color`. `auto`: PNG when the result has transparency, else JPEG (the matte alone: PNG). `zip`: an archive of `color.jpg` (RGB JPEG) and `alpha.png` (8-bit greyscale), stored, as remove.bg\'s.',
      },
    },
  }),
  row({
    key: 'bgColor', api: 'bg_color', flag: '--bg-color <color>', help: 'transparent, a hex colour such as #ffffff or 81d4fa77 (with alpha), or a CSS name such as green (default: transparent)',
    completion: { summary: 'background: transparent, a hex colour or a CSS name', values: ['transparent'] },
    library: {}, parse: (value, param, source) => parseColor(value, source, param), defaults: { api: null, cli: null, library: null }, changesOutput: true,
    record: { absent: null, text: (color) => colorToHex(color) },
    openapi: {
      name: 'BgColor',
      schema: {
        type: 'string', default: 'transparent',
        description: '`transparent`, a hex colour of 3, 4, 6 or 8 digits with or without `#` (4 and 8 carry an alpha: a translucent background), or a CSS colour name.',
        examples: ['transparent', '#ffffff', '0f0', '81d4fa77', 'green'],
      },
    },
  }),
  row({
    key: 'crop', api: 'crop', flag: '--crop', help: 'crop to the subject\'s bounding box',
    completion: { summary: 'crop to the subject\'s bounding box' },
    library: {}, parse: booleanOf, defaults: { api: false, cli: false, library: false }, changesOutput: true,
    openapi: { name: 'Crop', schema: { type: 'boolean', description: 'Crop to the subject\'s bounding box.' } },
  }),
  row({
    key: 'type', api: 'type', flag: null, help: '',
    completion: null,
    library: false, parse: enumOf(TYPES), defaults: {}, changesOutput: false,
    openapi: { name: 'SubjectType', schema: { type: 'string', enum: [...TYPES], description: 'A hint only, accepted for compatibility; the subject is detected automatically.' } },
  }),
  row({
    key: 'quality', api: 'quality', flag: '--quality <quality>', cliConfig: 'quality',
    completion: { summary: 'speed against quality', values: QUALITIES },
    help: 'fast | balanced | best | max: speed against quality, the model\'s input size; max adds a second pass on a small subject\'s box (default: best, or `quality` in the config)',
    library: {}, parse: enumOf(QUALITIES), defaults: { library: 'best' }, changesOutput: true, record: { absent: 'best' },
    openapi: {
      name: 'Quality',
      schema: {
        type: 'string', enum: [...QUALITIES], default: 'best',
        description: 'An addition to v1: speed against quality (the model\'s input side: fast 512, balanced 768, best 1024; max is best plus a second pass on a small subject\'s box, up to twice the time). Absent means `best`.',
      },
    },
  }),
  row({
    key: 'precision', api: 'precision', flag: '--precision <precision>', cliConfig: 'precision',
    completion: { summary: 'model number format (int8 on VNNI CPUs)', values: PRECISIONS },
    help: 'auto | fp32 | int8: the model\'s number format; auto runs int8 only on a CPU with VNNI and when int8 passed the quality bar (default: auto, or `precision` in the config)',
    // The library sets it per remover (RemoverOptions), not per call.
    library: false, parse: enumOf(PRECISIONS), defaults: {}, changesOutput: true, record: { absent: 'auto' },
    openapi: {
      name: 'Precision',
      schema: {
        type: 'string', enum: [...PRECISIONS], default: 'auto',
        description: 'An addition to v1: the model\'s number format. `fp32` or `int8` (a statically quantized copy, faster on CPUs with VNNI, its matte close to fp32\'s); `auto` runs int8 only where the server\'s CPU has AVX512-VNNI or AVX-VNNI and the int8 model passed the quality bar, else fp32. Absent means the server\'s configured default (`auto`). Another value is `invalid_request` (400).',
      },
    },
  }),
  row({
    key: 'mask', api: 'mask', flag: '--mask', help: 'write the alpha matte alone (greyscale) instead of the cutout',
    completion: { summary: 'write the alpha matte alone' },
    library: {}, parse: booleanOf, defaults: { cli: false, library: false }, changesOutput: true, record: { absent: false },
    openapi: { name: 'Mask', schema: { type: 'boolean', default: false, description: 'An addition to v1: the alpha matte alone (greyscale) instead of the cutout.' } },
  }),
  row({
    key: 'alpha', api: 'alpha', flag: '--alpha <mode>', help: 'soft | hard: hard thresholds the matte at 50 % (stickers, icons) (default: soft)',
    completion: { summary: 'soft matte, or hard (thresholded) for stickers and icons', values: ALPHAS },
    library: {}, parse: enumOf(ALPHAS), defaults: { cli: 'soft', library: 'soft' }, changesOutput: true, record: { absent: 'soft' },
    openapi: { name: 'Alpha', schema: { type: 'string', enum: [...ALPHAS], default: 'soft', description: 'An addition to v1: `hard` thresholds the matte at 50 % (stickers, icons).' } },
  }),
  row({
    key: 'refine', api: 'refine', flag: '--no-refine', help: 'plain bilinear matte instead of the guided refinement at full resolution',
    completion: { summary: 'plain bilinear matte, no guided refinement' },
    library: {}, parse: booleanOf, defaults: { cli: true, library: true }, changesOutput: true, record: { absent: true },
    openapi: { name: 'Refine', schema: { type: 'boolean', default: true, description: 'An addition to v1: the guided refinement of the matte at full resolution; `false` gives the plain bilinear matte.' } },
  }),
  row({
    key: 'decontaminate', api: 'decontaminate', flag: '--no-decontaminate', help: 'keep the original colours at soft edges (no foreground colour estimation)',
    completion: { summary: 'keep the original colours at soft edges' },
    library: {}, parse: booleanOf, defaults: { cli: true, library: true }, changesOutput: true, record: { absent: true },
    openapi: { name: 'Decontaminate', schema: { type: 'boolean', default: true, description: 'An addition to v1: foreground colour estimation at soft edges; `false` keeps the original colours there.' } },
  }),
  // remove.bg's image options (docs/removebg.md has their full meaning).
  row({
    key: 'cropMargin', api: 'crop_margin', flag: '--crop-margin <margin>', help: 'with --crop: a margin of 1, 2 or 4 lengths in px or % of the subject, e.g. 20px, 10% or "10px 20px"; at most 500px or 50% per side; the canvas may grow past the photo',
    completion: { summary: 'margin around the crop, px or %' },
    library: {}, parse: (value, param, source) => parseCropMargin(value, source), defaults: {}, changesOutput: true,
    record: { text: (m) => lengthsToText([m.top, m.right, m.bottom, m.left]) },
    openapi: { name: 'CropMargin', schema: { type: 'string', examples: ['20px', '10%', '10px 20px', '0 5% 10px 5%'], description: 'With `crop`: a margin around the subject, 1, 2 or 4 lengths (CSS order) in `px` (the result\'s pixels) or `%` (of the subject\'s height, top and bottom, or width, left and right); at most 500px or 50% per side. The canvas may grow past the photo: the part outside it is transparent (or the background).' } },
  }),
  row({
    key: 'roi', api: 'roi', flag: '--roi <rect>', help: 'only this rectangle "x1 y1 x2 y2" (px or % of the photo) may hold the subject',
    completion: { summary: 'only this rectangle may hold the subject: x1 y1 x2 y2' },
    library: {}, parse: (value, param, source) => parseRoi(value, source), defaults: {}, changesOutput: true,
    record: { text: (roi) => lengthsToText([roi.x1, roi.y1, roi.x2, roi.y2]) },
    openapi: { name: 'Roi', schema: { type: 'string', examples: ['0% 0% 100% 100%', '10px 20px 400px 300px'], description: 'Region of interest `x1 y1 x2 y2`, each in `px` of the input or `%` of its size: only this rectangle may hold foreground. Outside the image or empty: `invalid_request`.' } },
  }),
  row({
    key: 'scale', api: 'scale', flag: '--scale <percent>', help: 'the subject fills this share of the canvas, 10% to 100%, or original (default); implies --position center',
    completion: { summary: 'share of the canvas the subject fills', values: ['original'] },
    library: {}, parse: (value, param, source) => parseScale(value, source), defaults: {}, changesOutput: true,
    record: { text: (scale) => `${Math.round(scale * 100)}%` },
    openapi: { name: 'Scale', schema: { type: 'string', examples: ['80%', 'original'], description: 'The subject\'s box is resized to fill this share of the canvas (10% to 100%, aspect kept), or `original`. Implies `position=center`.' } },
  }),
  row({
    key: 'position', api: 'position', flag: '--position <where>', help: 'original (default), center, or 1-2 percentages "X% Y%" (0% left/top, 100% right/bottom)',
    completion: { summary: 'where the subject goes', values: ['original', 'center'] },
    library: {}, parse: (value, param, source) => parsePosition(value, source), defaults: {}, changesOutput: true,
    record: { text: (p) => (typeof p === 'string' ? p : `${p.x * 100}% ${p.y * 100}%`) },
    openapi: { name: 'Position', schema: { type: 'string', examples: ['center', '50% 100%', 'original'], description: 'Where the subject\'s box goes on the canvas: `original`, `center`, or one (both axes) or two (horizontal, vertical) percentages of the free space.' } },
  }),
  row({
    key: 'bgImage', api: 'bg_image_url', flag: '--bg-image <file|url>', help: 'a background picture (a file or an http(s) URL), centred and resized to cover the canvas',
    completion: { summary: 'background picture: a file or URL', values: 'file' },
    library: {}, parse: (value, param, source) => parseBgImage(value, param, source), defaults: {}, changesOutput: true,
    // The picture's bytes, not its name: a changed picture redoes the outputs.
    record: { name: 'bg_image_sha256', text: (place, request) => (request.bgImageData ? createHash('sha256').update(request.bgImageData).digest('hex') : place) },
    openapi: { name: 'BgImageUrl', schema: { type: 'string', format: 'uri', description: 'A background picture by URL, fetched under the same rules as `image_url`, centred and resized to cover the result (aspect kept). Not with `bg_color`.' } },
  }),
  row({
    key: 'shadow', api: 'add_shadow', flag: '--shadow', help: 'accepted for remove.bg compatibility; no shadow is drawn (docs/removebg.md)',
    completion: { summary: 'accepted for remove.bg compatibility; no shadow is drawn' },
    library: {}, parse: booleanOf, defaults: {}, changesOutput: false,
    openapi: { name: 'AddShadow', schema: { type: 'boolean', default: false, description: 'Accepted for compatibility with remove.bg and ignored: no shadow is drawn (docs/removebg.md says why).' } },
  }),
]);

/** A background picture's place: a non-empty string (a URL, or at the CLI and in the library a file path). */
function parseBgImage(value: unknown, param: string, source: OptionSource): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new OptionError(param, `Expected ${source === 'api' ? 'an http(s) URL' : 'a file or an http(s) URL'} for ${source === 'cli' ? '--bg-image' : param} but received ${JSON.stringify(value)}`);
  }
  return value.trim();
}

/** The API parameters of the image options, in table order. */
export const OPTION_PARAMS: readonly string[] = Object.freeze(OPTION_TABLE.flatMap((r) => (r.api ? [r.api] : [])));

/** The defaults of one front door, read off the table (absent ones stay absent). */
function defaultsOf(door: 'api' | 'cli' | 'library'): Readonly<ImageOptions> {
  const out: Record<string, unknown> = {};
  for (const r of OPTION_TABLE) if (r.defaults[door] !== undefined) out[r.key] = r.defaults[door];
  return Object.freeze(out as unknown as ImageOptions);
}

export const API_DEFAULTS: Readonly<ImageOptions> = defaultsOf('api');
export const CLI_DEFAULTS: Readonly<ImageOptions> = defaultsOf('cli');
export const LIBRARY_DEFAULTS: Readonly<ImageOptions> = defaultsOf('library');

/**
 * Parses raw option values keyed by their API names (strings from a form or flags, or JSON values)
 * into ImageOptions. Missing values take the defaults given (the API and the CLI differ on `size`).
 * A bad value throws an OptionError whose `param` names it.
 */
export function parseImageOptions(raw: Readonly<Record<string, unknown>>, source: OptionSource, defaults: Readonly<ImageOptions>): ImageOptions {
  const out: Record<string, unknown> = { ...defaults };
  for (const r of OPTION_TABLE) {
    if (r.api === null || raw[r.api] === undefined) continue;
    out[r.key] = r.parse(raw[r.api], r.api, source);
  }
  return out as unknown as ImageOptions;
}
