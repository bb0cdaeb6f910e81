/**
 * The image options: one request type (ImageOptions) and one table (OPTION_TABLE) that describes
 * each option once: its API parameter, CLI flag and library key, its parser, its default at each
 * front door, whether it changes the output, and its OpenAPI schema. The API's parameters
 * (server/v1/v1-params.ts), the OpenAPI document, the CLI's image flags (commands/image-flags.ts) and
 * the library's options (library/options.ts) are read off the table. Messages follow one shape:
 * "Expected X for Y but received Z", naming the option as the door spells it.
 * docs/internals.md ("Adding an image option") says how to add a row.
 */
import { colorFromText, colorToText } from './colors.js';
import { CutoutError } from './errors.js';
import { createHash } from 'node:crypto';
import {
  alignToText, canvasToText, lengthsToText, parseAlign, parseCanvas, parseCropMargin, parseOutlineWidth, parsePosition, parseRoi, parseScale, parseSide,
  parseSpacing, spaceToText, spacingToText, type Align, type CanvasSpec, type Margin, type Position, type Roi, type Space, type Spacing,
} from './layout-options.js';
import { OptionError, type OptionSource } from './option-error.js';
import { LIMITS } from './limits.js';

export const SIZES = ['preview', 'full', 'auto'] as const;
export const FORMATS = ['png', 'webp', 'jpg', 'gif'] as const;
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
/** The shadow under the subject (docs/product-photos.md); `none` draws none. */
export const SHADOWS = ['none', 'drop', 'float', 'cast'] as const;
/** How `bg_blur` blurs the photo's own background. */
export const BLUR_MODES = ['gaussian', 'bokeh'] as const;
/** `auto`: an input with transparency keeps its own alpha as the matte (no model run); `never`: the model always runs. */
export const KEEP_ALPHA = ['never', 'auto'] as const;
/** How the subject is scaled into its room on the canvas: `fit` (whole, touching one pair of sides) or `fill` (covering it, cut where it overflows). */
export const SCALINGS = ['fit', 'fill'] as const;
/** An animated GIF, WebP or PNG: every frame cut out (`keep`), or the first only (`first`, a still). */
export const ANIMATIONS = ['keep', 'first'] as const;
/** Parameters of remove.bg that api-spec 2.1 rule 3 names as unsupported. */
export const UNSUPPORTED_PARAMS = ['channels'] as const;

export type Size = (typeof SIZES)[number];
export type Format = (typeof FORMATS)[number];
export type ImageFormat = (typeof IMAGE_FORMATS)[number];
export type SubjectType = (typeof TYPES)[number];
export type Quality = (typeof QUALITIES)[number];
export type Precision = (typeof PRECISIONS)[number];
export type Alpha = (typeof ALPHAS)[number];
export type ShadowMode = (typeof SHADOWS)[number];
export type BlurMode = (typeof BLUR_MODES)[number];
export type KeepAlpha = (typeof KEEP_ALPHA)[number];
export type Scaling = (typeof SCALINGS)[number];
export type Animation = (typeof ANIMATIONS)[number];

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
  // Product photos (docs/product-photos.md): absent, each leaves the result as it was before.
  /** `auto`: an input with transparency keeps its own alpha as the matte, and the model does not run; absent: `never`. */
  keepAlpha?: KeepAlpha;
  /** The output's canvas: WxH, the photo's size (`original`) or the subject's box (`subject`). */
  canvas?: CanvasSpec;
  /** Bound the width / height of an `original` or `subject` canvas (pixels). */
  maxWidth?: number;
  maxHeight?: number;
  /** Space between the subject's box and the canvas (less the margin); cropped sides snap unless `snapCropped` is false. */
  padding?: Spacing;
  /** Space around the canvas's content that is never ignored. */
  margin?: Spacing;
  /** Where the subject goes in its free space; absent: centre. */
  align?: Align;
  /** `fit` (absent: the whole subject inside its room) or `fill` (it covers the room, cut where it overflows). */
  scaling?: Scaling;
  /** A side of the subject cut by the photo's edge ignores padding; absent means true (only false is stored). */
  snapCropped?: false;
  /** A ring outside the subject's edge: pixels or a ratio of the canvas's long side. */
  outlineWidth?: Space;
  /** The ring's colour; absent: white. */
  outlineColor?: Rgb;
  /** The ring's blur, a ratio of the canvas's long side (0 .. 0.025). */
  outlineBlur?: number;
  /** The shadow under the subject (v1 `shadow`, the CLI's `--shadow [mode]`; a bare `--shadow` or `true`: float). */
  shadow?: ShadowMode;
  /** remove.bg's `add_shadow`: true draws the `float` shadow when `shadow` is not given. */
  addShadow?: boolean;
  /** 0 .. 1; absent: 0.5. */
  shadowOpacity?: number;
  /** 0 (hard) .. 1 (soft); absent: 0.5. */
  shadowSoftness?: number;
  /** Degrees, where the light comes from, clockwise from above: 0 throws the shadow below. */
  shadowDirection?: number;
  /** Degrees above the floor of the light of a `cast` shadow; absent: 45. */
  shadowElevation?: number;
  /** The shadow's colour; absent: black. */
  shadowColor?: Rgb;
  /** The photo's own background, blurred, behind the sharp subject: the radius as a ratio of the long side (0 .. 0.05]. */
  bgBlur?: number;
  /** `gaussian` (absent) or `bokeh` (a disc, highlights kept bright). */
  bgBlurMode?: BlurMode;
  /** Pixel density written into the file (PNG pHYs, JPEG JFIF; WebP has none). */
  dpi?: number;
  /** Keep the input's EXIF (orientation reset), XMP and RGB colour profile (else tag sRGB); absent: stripped. */
  keepMetadata?: boolean;
  /** An animated input: every frame cut out (absent: `keep`), or its first frame only (`first`). */
  animation?: Animation;
  /**
   * Set by a door when the caller named no format (the door's default applies): an animation is
   * then written as animated WebP, the one format with both animation and soft alpha that every
   * browser shows, rather than the still default.
   */
  formatByDefault?: true;
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

export const CONTENT_TYPES: Readonly<Record<Format, string>> = Object.freeze({ png: 'image/png', webp: 'image/webp', jpg: 'image/jpeg', gif: 'image/gif' });

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
    key: 'format', api: 'format', flag: '--format <format>', help: 'png | webp | jpg | gif | auto | zip: auto is PNG with transparency, else JPEG; zip holds color.jpg and alpha.png; gif has 1-bit alpha (default: png, an animation webp, or from --out FILE)',
    completion: { summary: 'output encoding', values: IMAGE_FORMATS },
    // The library also gives `raw` (8-bit pixels for a sharp chain): RemoveRequest's format.
    library: { parse: (value, name) => (value === 'jpeg' ? 'jpg' : parseEnum(name, [...IMAGE_FORMATS, 'raw'] as const, value, 'api') as ImageFormat) },
    parse: (value, _param, source) => parseFormat(value, source), defaults: { api: 'png', cli: 'png', library: 'png' }, changesOutput: true,
    openapi: {
      name: 'Format',
      schema: {
        type: 'string', enum: [...IMAGE_FORMATS],
        description: 'Output encoding. `jpg` has no alpha: combine it with `bg_color`. `gif` has 1-bit alpha (a pixel is transparent or not). `auto`: PNG when the result has transparency, else JPEG (the matte alone: PNG). `zip`: an archive of `color.jpg` (RGB JPEG) and `alpha.png` (8-bit greyscale), stored, as remove.bg\'s. An animated input keeps its frames in `webp`, `gif` and `png` (APNG); absent, an animation is answered as animated WebP (see `animation`).',
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
    key: 'addShadow', api: 'add_shadow', flag: null, help: '',
    completion: null,
    library: false, parse: booleanOf, defaults: {}, changesOutput: true,
    openapi: { name: 'AddShadow', schema: { type: 'boolean', default: false, description: 'remove.bg\'s spelling: `true` draws the `float` shadow (under every kind of subject; remove.bg draws car shadows only), unless `shadow` is given, which decides.' } },
  }),
  // Product photos (docs/product-photos.md): the input's alpha, the canvas, placement, outline, shadow, background blur and density.
  row({
    key: 'keepAlpha', api: 'keep_alpha', flag: '--keep-alpha <mode>', help: 'never (default) | auto: an input with transparency keeps its own alpha as the matte, without the model',
    completion: { summary: 'keep an input\'s own transparency', values: KEEP_ALPHA },
    library: {}, parse: enumOf(KEEP_ALPHA), defaults: {}, changesOutput: true,
    openapi: { name: 'KeepAlpha', schema: { type: 'string', enum: [...KEEP_ALPHA], default: 'never', description: '`auto`: an input that already has transparency (some pixel of its alpha below opaque) keeps its own alpha as the matte, and the model does not run (the result\'s confidence is 1); an opaque input goes to the model. `never`: the model always runs.' } },
  }),
  row({
    key: 'canvas', api: 'canvas', flag: '--canvas <size>', help: 'WxH (exact output size, e.g. 1000x1000), original (the photo\'s size) or subject (the subject\'s box with its padding)',
    completion: { summary: 'output canvas: WxH, original or subject', values: ['1000x1000', 'original', 'subject'] },
    library: {}, parse: (value, param, source) => parseCanvas(value, param, source), defaults: {}, changesOutput: true,
    record: { text: (c) => canvasToText(c) },
    openapi: { name: 'Canvas', schema: { type: 'string', examples: ['1000x1000', 'original', 'subject'], description: 'The output\'s canvas: `WxH` (exact size in pixels, each side up to 10000, at most 25 MP), `original` (the photo\'s size) or `subject` (the subject\'s box plus its padding). With a `WxH` or `subject` canvas the subject is scaled to fit (aspect kept) inside the canvas less margin and padding, then aligned. Not with `crop`, `crop_margin`, `scale` or `position` (remove.bg\'s layout).' } },
  }),
  row({
    key: 'maxWidth', api: 'max_width', flag: '--max-width <px>', help: 'bound the width of an original or subject canvas (pixels)',
    completion: { summary: 'largest width of an original or subject canvas' },
    library: { parse: (value, name) => parseSide(value, name, 'api') }, parse: (value, param, source) => parseSide(value, param, source), defaults: {}, changesOutput: true,
    openapi: { name: 'MaxWidth', schema: { type: 'integer', minimum: 1, maximum: 10000, description: 'With `canvas` `original` or `subject` (or none): the result is scaled down, aspect kept, to at most this width.' } },
  }),
  row({
    key: 'maxHeight', api: 'max_height', flag: '--max-height <px>', help: 'bound the height of an original or subject canvas (pixels)',
    completion: { summary: 'largest height of an original or subject canvas' },
    library: { parse: (value, name) => parseSide(value, name, 'api') }, parse: (value, param, source) => parseSide(value, param, source), defaults: {}, changesOutput: true,
    openapi: { name: 'MaxHeight', schema: { type: 'integer', minimum: 1, maximum: 10000, description: 'With `canvas` `original` or `subject` (or none): the result is scaled down, aspect kept, to at most this height.' } },
  }),
  row({
    key: 'padding', api: 'padding', flag: '--padding <space>', help: 'space between the subject and the canvas: 1-4 values (CSS order), each NNpx, NN% or a ratio 0-0.49; a side cut by the photo\'s edge snaps to the canvas',
    completion: { summary: 'space around the subject: 1-4 of NNpx, NN% or 0-0.49', values: ['10%', '0.1', '40px'] },
    library: {}, parse: (value, param, source) => parseSpacing(value, param, source), defaults: {}, changesOutput: true,
    record: { text: (p) => spacingToText(p) },
    openapi: { name: 'Padding', schema: { type: 'string', examples: ['10%', '0.1', '40px 5%', '0 10% 20px 10%'], description: 'Space between the subject\'s box and the canvas (inside the margin): 1 to 4 values in CSS order, each `NNpx`, `NN%` (of the canvas\'s width for left and right, its height for top and bottom; below 50%) or a ratio from 0 to 0.49. A side of the subject that the photo cut (touching its edge) ignores its padding and snaps to the canvas\'s edge unless `snap_cropped=false`.' } },
  }),
  row({
    key: 'margin', api: 'margin', flag: '--margin <space>', help: 'space inside the canvas\'s edge that is never ignored: 1-4 values as --padding',
    completion: { summary: 'space inside the canvas edge, never ignored', values: ['5%', '20px'] },
    library: {}, parse: (value, param, source) => parseSpacing(value, param, source), defaults: {}, changesOutput: true,
    record: { text: (m) => spacingToText(m) },
    openapi: { name: 'Margin', schema: { type: 'string', examples: ['5%', '20px 0'], description: 'Space inside the canvas\'s edge, outside the padding, that cropped sides do not ignore: the same forms as `padding`.' } },
  }),
  row({
    key: 'align', api: 'align', flag: '--align <where>', help: 'center (default), top, bottom, left, right, or two words such as "bottom left"',
    completion: { summary: 'where the subject goes on the canvas', values: ['center', 'top', 'bottom', 'left', 'right'] },
    library: {}, parse: (value, param, source) => parseAlign(value, param, source), defaults: {}, changesOutput: true,
    record: { text: (a) => alignToText(a) },
    openapi: { name: 'Align', schema: { type: 'string', examples: ['center', 'bottom', 'bottom left'], description: 'Where the subject goes in the canvas\'s free space: `center` (default), `top`, `bottom`, `left`, `right`, or one vertical and one horizontal word (`bottom left`).' } },
  }),
  row({
    key: 'scaling', api: 'scaling', flag: '--scaling <mode>', help: 'fit (default: the whole subject inside the canvas less padding) or fill (it covers that room and is cut where it overflows)',
    completion: { summary: 'fit the subject inside, or fill the room', values: SCALINGS },
    library: {}, parse: enumOf(SCALINGS), defaults: {}, changesOutput: true,
    openapi: { name: 'Scaling', schema: { type: 'string', enum: [...SCALINGS], default: 'fit', description: 'How the subject is scaled into the canvas less margin and padding: `fit` keeps it whole and touching one pair of sides; `fill` covers the room, cutting what overflows.' } },
  }),
  row({
    key: 'snapCropped', api: 'snap_cropped', flag: '--snap-cropped <bool>', help: 'true (default): a side of the subject cut by the photo\'s edge ignores padding and touches the canvas; false keeps its padding',
    completion: { summary: 'cropped sides snap to the canvas edge', values: ['true', 'false'] },
    // Only false is kept: true is what absent means, so a manifest of a plain run stays as before.
    library: { parse: (value, name) => (parseBoolean(name, value, 'api') ? null : false) },
    parse: (value, param, source) => (parseBoolean(param, value, source) ? undefined : false), defaults: {}, changesOutput: true,
    openapi: { name: 'SnapCropped', schema: { type: 'boolean', default: true, description: 'A side of the subject\'s box that touches the photo\'s edge (a portrait cut below the elbows) ignores its padding and snaps to the canvas\'s edge (inside the margin); `false` keeps the padding there.' } },
  }),
  row({
    key: 'outlineWidth', api: 'outline_width', flag: '--outline-width <width>', help: 'a sticker outline around the subject: pixels (8px) or a ratio of the canvas\'s long side (0-0.1)',
    completion: { summary: 'outline around the subject: NNpx or 0-0.1', values: ['8px', '0.01'] },
    library: {}, parse: (value, param, source) => parseOutlineWidth(value, param, source), defaults: {}, changesOutput: true,
    record: { text: (w) => spaceToText(w) },
    openapi: { name: 'OutlineWidth', schema: { type: 'string', examples: ['8px', '0.01'], description: 'A ring outside the subject\'s edge, opaque in `outline_color` up to this width: `NNpx` (at most 500) or a ratio of the canvas\'s long side from 0 to 0.1. Part of the subject for placement.' } },
  }),
  row({
    key: 'outlineColor', api: 'outline_color', flag: '--outline-color <color>', help: 'the outline\'s colour: hex or a CSS name (default: white)',
    completion: { summary: 'outline colour' },
    library: {}, parse: (value, param, source) => parseOpaqueColor(value, param, source), defaults: {}, changesOutput: true,
    record: { text: (c) => colorToHex(c) },
    openapi: { name: 'OutlineColor', schema: { type: 'string', default: '#ffffff', examples: ['white', '#000000'], description: 'The outline\'s colour: a hex colour (with an alpha: a translucent ring) or a CSS colour name. Absent: white.' } },
  }),
  row({
    key: 'outlineBlur', api: 'outline_blur', flag: '--outline-blur <ratio>', help: 'blur the outline into a glow: a ratio of the canvas\'s long side, 0-0.025',
    completion: { summary: 'outline blur (glow): 0-0.025' },
    library: {}, parse: numberIn(0, 0.025), defaults: {}, changesOutput: true,
    openapi: { name: 'OutlineBlur', schema: { type: 'number', minimum: 0, maximum: 0.025, description: 'Blur of the outline (a glow), as a ratio of the canvas\'s long side, 0 to 0.025.' } },
  }),
  row({
    // Kept from remove.bg's `--shadow` (a bare flag): a bare --shadow draws `float`.
    key: 'shadow', api: 'shadow', flag: '--shadow [mode]', help: 'a shadow under the subject: none, drop, float (a bare --shadow), cast',
    completion: { summary: 'shadow under the subject', values: SHADOWS },
    library: { parse: (value, name) => parseShadow(value, name, 'api') }, parse: (value, param, source) => parseShadow(value, param, source), defaults: {}, changesOutput: true,
    openapi: { name: 'Shadow', schema: { type: 'string', enum: [...SHADOWS], description: 'A shadow drawn under the subject, never over it, cut at the canvas\'s edge: `drop` (the matte offset and blurred), `float` (a soft ellipse below the subject, as over a surface), `cast` (the silhouette thrown onto the floor by a light at `shadow_direction` and `shadow_elevation`), or `none`. `true` is `float`, `false` is `none`. Absent: `none` unless `add_shadow=true`.' } },
  }),
  row({
    key: 'shadowOpacity', api: 'shadow_opacity', flag: '--shadow-opacity <0-1>', help: 'the shadow\'s opacity, 0 to 1 (default: 0.5)',
    completion: { summary: 'shadow opacity 0-1' },
    library: {}, parse: numberIn(0, 1), defaults: {}, changesOutput: true,
    openapi: { name: 'ShadowOpacity', schema: { type: 'number', minimum: 0, maximum: 1, default: 0.5, description: 'The shadow\'s opacity at its darkest, 0 to 1.' } },
  }),
  row({
    key: 'shadowSoftness', api: 'shadow_softness', flag: '--shadow-softness <0-1>', help: 'the shadow\'s blur, 0 (hard) to 1 (soft) (default: 0.5)',
    completion: { summary: 'shadow softness 0-1' },
    library: {}, parse: numberIn(0, 1), defaults: {}, changesOutput: true,
    openapi: { name: 'ShadowSoftness', schema: { type: 'number', minimum: 0, maximum: 1, default: 0.5, description: 'The shadow\'s blur, 0 (hard edge) to 1 (soft).' } },
  }),
  row({
    key: 'shadowDirection', api: 'shadow_direction', flag: '--shadow-direction <degrees>', help: 'where the light comes from, degrees clockwise from above: 0 (default) throws the shadow below, 90 to the left',
    completion: { summary: 'light direction in degrees (0: shadow below)' },
    library: {}, parse: numberIn(-360, 360), defaults: {}, changesOutput: true,
    openapi: { name: 'ShadowDirection', schema: { type: 'number', minimum: -360, maximum: 360, default: 0, description: 'Where the light comes from, in degrees clockwise from straight above: 0 throws the shadow below the subject (`drop`) or towards the viewer (`cast`), 90 (light from the right) to the left, 180 behind.' } },
  }),
  row({
    key: 'shadowElevation', api: 'shadow_elevation', flag: '--shadow-elevation <degrees>', help: 'cast shadow: the light\'s height above the floor, 5 to 85 degrees (default: 45)',
    completion: { summary: 'cast shadow light elevation 5-85 degrees' },
    library: {}, parse: numberIn(5, 85), defaults: {}, changesOutput: true,
    openapi: { name: 'ShadowElevation', schema: { type: 'number', minimum: 5, maximum: 85, default: 45, description: '`cast`: the light\'s elevation above the floor in degrees; lower is a longer shadow.' } },
  }),
  row({
    key: 'shadowColor', api: 'shadow_color', flag: '--shadow-color <color>', help: 'the shadow\'s colour: hex or a CSS name (default: black)',
    completion: { summary: 'shadow colour' },
    library: {}, parse: (value, param, source) => parseOpaqueColor(value, param, source), defaults: {}, changesOutput: true,
    record: { text: (c) => colorToHex(c) },
    openapi: { name: 'ShadowColor', schema: { type: 'string', default: '#000000', examples: ['black', '#203040'], description: 'The shadow\'s colour (its opacity is `shadow_opacity`).' } },
  }),
  row({
    key: 'bgBlur', api: 'bg_blur', flag: '--bg-blur <radius>', help: 'keep the photo\'s own background, blurred: true (radius 0.01) or a radius as a ratio of the long side, up to 0.05',
    completion: { summary: 'blur the photo\'s own background: true or 0-0.05', values: ['true', '0.01', '0.03'] },
    library: { parse: (value, name) => parseBgBlur(value, name, 'api') ?? null }, parse: (value, param, source) => parseBgBlur(value, param, source), defaults: {}, changesOutput: true,
    openapi: { name: 'BgBlur', schema: { type: 'string', examples: ['true', '0.01', '0.03'], description: 'The photo\'s own background, blurred, behind the sharp subject (the output is opaque): `true` (radius 0.01) or the radius as a ratio of the long side, above 0 and at most 0.05; `false`: none. Not with `bg_color` or a background picture.' } },
  }),
  row({
    key: 'bgBlurMode', api: 'bg_blur_mode', flag: '--bg-blur-mode <mode>', help: 'gaussian (default) or bokeh (a lens\'s disc, highlights kept bright)',
    completion: { summary: 'background blur kind', values: BLUR_MODES },
    library: {}, parse: enumOf(BLUR_MODES), defaults: {}, changesOutput: true,
    openapi: { name: 'BgBlurMode', schema: { type: 'string', enum: [...BLUR_MODES], default: 'gaussian', description: 'How `bg_blur` blurs: `gaussian`, or `bokeh` (a disc, as an out-of-focus lens, highlights kept bright).' } },
  }),
  row({
    key: 'dpi', api: 'dpi', flag: '--dpi <dpi>', help: 'pixel density written into the file, 72 to 1200 (PNG and JPEG; WebP has none)',
    completion: { summary: 'pixel density 72-1200', values: ['72', '300'] },
    library: {}, parse: numberIn(72, 1200, true), defaults: {}, changesOutput: true,
    openapi: { name: 'Dpi', schema: { type: 'integer', minimum: 72, maximum: 1200, description: 'Pixel density written into the file: PNG\'s pHYs, JPEG\'s JFIF density; WebP has no field for it. Absent: none written.' } },
  }),
  row({
    key: 'keepMetadata', api: 'keep_metadata', flag: '--keep-metadata', help: 'keep the input\'s EXIF (orientation reset to upright), XMP and RGB colour profile in the output (default: stripped, sRGB)',
    completion: { summary: 'keep the input\'s EXIF, XMP and colour profile' },
    library: {}, parse: booleanOf, defaults: {}, changesOutput: true,
    openapi: { name: 'KeepMetadata', schema: { type: 'boolean', default: false, description: 'Keep the input\'s EXIF (its orientation set to 1: the pixels are upright), XMP and colour profile in the output (EXIF in PNG and JPEG, XMP and the profile in each format but GIF). An RGB profile (Display P3, Adobe RGB) is kept by converting the pixels into it; a CMYK or grey one cannot describe an RGB output, which is then tagged sRGB. Absent: metadata, GPS included, is stripped and the output is sRGB.' } },
  }),
  row({
    key: 'animation', api: 'animation', flag: '--animation <mode>', help: 'an animated GIF, WebP or PNG: keep (default: every frame cut out, animated WebP unless --format gif or png) or first (its first frame, a still)',
    completion: { summary: 'animated input: every frame or the first', values: ANIMATIONS },
    library: {}, parse: enumOf(ANIMATIONS), defaults: {}, changesOutput: true,
    openapi: { name: 'Animation', schema: { type: 'string', enum: [...ANIMATIONS], default: 'keep', description: 'An animated GIF, WebP or PNG (APNG): `keep` cuts out every frame, with the same count and timing, as animated WebP unless `format` is `gif` (1-bit alpha) or `png` (APNG); `first` cuts out the first frame only, as a still. Mattes of successive frames are smoothed where the picture did not change. One result, priced as a still; `/remove` answers animations up to 6.6 MP in all (frames x pixels) and says when to use a job (docs/http-api.md, "Animations").' } },
  }),
]);

/** A number from `min` to `max` (a JSON number or its text); `integer`: a whole number. */
function numberIn(min: number, max: number, integer = false) {
  return (value: unknown, param: string, source: OptionSource): number => {
    const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*-?(\d+(\.\d+)?|\.\d+)\s*$/.test(value) ? Number(value) : NaN;
    if (!(n >= min && n <= max) || (integer && !Number.isInteger(n))) throw expected(param, source, `${integer ? 'a whole number' : 'a number'} from ${min} to ${max}`, value);
    return n;
  };
}

/** A colour that is not `transparent` (an outline's, a shadow's). */
function parseOpaqueColor(value: unknown, param: string, source: OptionSource): Rgb {
  const c = parseColor(value, source, param);
  if (c === null) throw expected(param, source, 'a colour (not transparent) such as white, #000000 or 203040', value);
  return c;
}

/** `shadow`: a mode, or a boolean (remove.bg's and the bare flag's spelling): true is `float`, false `none`. */
export function parseShadow(value: unknown, param: string, source: OptionSource): ShadowMode {
  if (value === true) return 'float';
  if (value === false) return 'none';
  if (typeof value === 'string') {
    const v = value.trim().toLowerCase();
    if (v === 'true' || v === '1') return 'float';
    if (v === 'false' || v === '0') return 'none';
    if (source === 'cli' && !(SHADOWS as readonly string[]).includes(v)) {
      // `cutout --shadow photo.jpg`: commander hands the input to the flag as its mode.
      throw expected(param, source, `one of ${SHADOWS.join(', ')} (a bare --shadow just before an input takes that input as its mode: write --shadow float, or put --shadow after the inputs)`, value);
    }
  }
  return parseEnum(param, SHADOWS, value, source);
}

/** `bg_blur`: true (0.01), false (undefined: no blur), or a radius ratio in (0, 0.05]. */
export function parseBgBlur(value: unknown, param: string, source: OptionSource): number | undefined {
  if (value === true) return 0.01;
  if (value === false) return undefined;
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim().toLowerCase() : '';
  if (text === 'true') return 0.01;
  if (text === 'false') return undefined;
  const n = /^(\d+(\.\d+)?|\.\d+)$/.test(text) ? Number(text) : NaN;
  if (!(n > 0 && n <= 0.05)) throw expected(param, source, 'true, false, or a radius above 0 and at most 0.05 (of the long side)', value);
  return n;
}

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
  return checkImageOptions(out as unknown as ImageOptions, source);
}

/**
 * Checks what no single row can: options that cannot go together. remove.bg's layout (`crop`,
 * `crop_margin`, `scale`, `position`) keeps its meaning when no product layout is asked; with one
 * (`canvas`, `padding`, `margin`, `align`) it is refused rather than ignored. `max_width` and
 * `max_height` bound a canvas cutout sizes, not a `WxH` one. `bg_blur` is a background of its
 * own. Throws an OptionError naming the parameter as `source` spells it; returns `options`.
 */
export function checkImageOptions<T extends Partial<Omit<ImageOptions, 'format'>>>(options: T, source: OptionSource | 'library'): T {
  const name = (api: string, key: string) => (source === 'library' ? key : source === 'cli' ? `--${api.replace(/_/g, '-')}` : api);
  const layout = options.canvas !== undefined || options.padding !== undefined || options.margin !== undefined || options.align !== undefined || options.scaling !== undefined;
  if (layout) {
    const removebg = options.crop ? ['crop', 'crop'] : options.cropMargin ? ['crop_margin', 'cropMargin'] : options.scale !== undefined ? ['scale', 'scale'] : options.position !== undefined ? ['position', 'position'] : null;
    if (removebg) {
      throw new OptionError(removebg[0], `${name(removebg[0], removebg[1])} is remove.bg's layout and cannot be combined with ${name('canvas', 'canvas')}, ${name('padding', 'padding')}, ${name('margin', 'margin')}, ${name('align', 'align')} or ${name('scaling', 'scaling')}; use canvas=subject for a crop and align for a position (docs/product-photos.md)`);
    }
  }
  if (options.canvas !== undefined && typeof options.canvas !== 'string') {
    const bound = options.maxWidth !== undefined ? ['max_width', 'maxWidth'] : options.maxHeight !== undefined ? ['max_height', 'maxHeight'] : null;
    if (bound) throw new OptionError(bound[0], `${name(bound[0], bound[1])} bounds an original or subject canvas; a ${canvasToText(options.canvas)} canvas has its size already`);
  }
  if (options.bgBlur !== undefined && (options.bgColor || options.bgImage !== undefined)) {
    throw new OptionError('bg_blur', `${name('bg_blur', 'bgBlur')} keeps the photo's own background; it cannot be combined with ${options.bgColor ? name('bg_color', 'bgColor') : name('bg_image_url', 'bgImage')}`, 'multiple_bg_sources');
  }
  return options;
}
