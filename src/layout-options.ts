/**
 * Parsers of remove.bg's layout options, cutout's own too: `crop_margin`, `roi`, `scale` and
 * `position`. Their text forms are remove.bg's ("10px 20%", "0% 0% 100% 100%", "80%", "50% 0%");
 * what they do to an image is in src/pipeline/layout.ts. Errors are OptionErrors
 * (`invalid_request`, naming the parameter) in the message shape of src/options.ts.
 */
import { LIMITS } from './limits.js';
import { OptionError, type OptionSource } from './option-error.js';

/** A length in pixels or in percent (of the image for `roi`, of the subject for `crop_margin`). */
export interface Length { value: number; unit: 'px' | '%' }

export interface Margin { top: Length; right: Length; bottom: Length; left: Length }

/** `x1 y1 x2 y2`: the only rectangle of the input that may hold foreground. */
export interface Roi { x1: Length; y1: Length; x2: Length; y2: Length }

/**
 * Where the subject goes on the canvas: `original` (where it was), `center`, or the share of the
 * free space left of and above it (0 .. 1: 0 is the left/top edge, 1 the right/bottom edge).
 */
export type Position = 'original' | 'center' | { x: number; y: number };

function label(param: string, source: OptionSource): string {
  return source === 'cli' ? `--${param.replace(/_/g, '-')}` : param;
}

function refuse(param: string, source: OptionSource, what: string, got: unknown): OptionError {
  return new OptionError(param, `Expected ${what} for ${label(param, source)} but received ${JSON.stringify(got)}`);
}

/** Space- or comma-separated words of an option's text; a number is taken as its text. */
function words(value: unknown): string[] | null {
  if (typeof value === 'number' && Number.isFinite(value)) return [String(value)];
  if (typeof value !== 'string') return null;
  const parts = value.trim().split(/[\s,]+/).filter(Boolean);
  return parts.length ? parts : null;
}

/** `12`, `12px`, `12.5%`: a bare number is pixels. Null when the word is no length. */
export function parseLength(word: string): Length | null {
  const m = /^(\d+(?:\.\d+)?|\.\d+)(px|%)?$/i.exec(word.trim());
  if (!m) return null;
  return { value: Number(m[1]), unit: m[2] === '%' ? '%' : 'px' };
}

/**
 * `crop_margin`: 1, 2 or 4 lengths, as CSS's `margin` (all; vertical horizontal; top right bottom
 * left). Pixels are the result's pixels, percentages are of the subject's height (top, bottom) or
 * width (left, right). At most 500 px or 50 % per side, as remove.bg.
 */
export function parseCropMargin(value: unknown, source: OptionSource): Margin {
  const what = 'a margin of 1, 2 or 4 lengths such as 20px, 10% or "10px 20px" (at most 500px or 50% each)';
  const list = words(value)?.map(parseLength);
  if (!list || list.some((l) => l === null) || ![1, 2, 4].includes(list.length)) throw refuse('crop_margin', source, what, value);
  const l = list as Length[];
  for (const len of l) {
    if ((len.unit === 'px' && len.value > LIMITS.cropMarginMaxPx) || (len.unit === '%' && len.value > LIMITS.cropMarginMaxPercent)) {
      throw refuse('crop_margin', source, what, value);
    }
  }
  if (l.length === 1) return { top: l[0], right: l[0], bottom: l[0], left: l[0] };
  if (l.length === 2) return { top: l[0], right: l[1], bottom: l[0], left: l[1] };
  return { top: l[0], right: l[1], bottom: l[2], left: l[3] };
}

/**
 * `roi`: four lengths `x1 y1 x2 y2`, pixels of the input image or percentages of its size. Their
 * order and bounds need the image's size, so they are checked when it is known (layout.ts).
 */
export function parseRoi(value: unknown, source: OptionSource): Roi {
  const list = words(value)?.map(parseLength);
  if (!list || list.length !== 4 || list.some((l) => l === null)) {
    throw refuse('roi', source, 'four lengths "x1 y1 x2 y2" in px or %, such as "0% 0% 100% 100%"', value);
  }
  const [x1, y1, x2, y2] = list as Length[];
  return { x1, y1, x2, y2 };
}

/** A percentage word (`80%`) as a number, or null. */
function percent(word: string): number | null {
  const m = /^(\d+(?:\.\d+)?|\.\d+)%$/.exec(word.trim());
  return m ? Number(m[1]) : null;
}

/**
 * `scale`: `original` (undefined: the subject keeps its size) or 10 % .. 100 %: the share of the
 * canvas the subject's box fills (its longer side relative to the canvas's, aspect kept).
 */
export function parseScale(value: unknown, source: OptionSource): number | undefined {
  const list = words(value);
  if (list?.length === 1 && list[0].toLowerCase() === 'original') return undefined;
  const p = list?.length === 1 ? percent(list[0]) : null;
  if (p === null || p < LIMITS.scaleMinPercent || p > 100) throw refuse('scale', source, `original or a percentage from ${LIMITS.scaleMinPercent}% to 100%`, value);
  return p / 100;
}

/** `position`: `original`, `center`, or one (both axes) or two (horizontal vertical) percentages. */
export function parsePosition(value: unknown, source: OptionSource): Position {
  const list = words(value);
  const what = 'original, center, or 1 or 2 percentages such as "50%" or "50% 100%"';
  if (list?.length === 1) {
    const word = list[0].toLowerCase();
    if (word === 'original') return 'original';
    if (word === 'center' || word === 'centre') return 'center';
  }
  const shares = list && list.length <= 2 ? list.map(percent) : null;
  if (!shares || shares.some((p) => p === null || p > 100)) throw refuse('position', source, what, value);
  const [x, y = x] = shares as number[];
  return { x: x / 100, y: y / 100 };
}

/** The text form back, for records and manifests: `10px 5%`, `0% 0% 100% 100%`. */
export function lengthsToText(lengths: readonly Length[]): string {
  return lengths.map((l) => `${l.value}${l.unit}`).join(' ');
}

// Product photos (docs/product-photos.md): the canvas, padding and margin, alignment, the outline.

/** The largest side of a `canvas=WxH` or a `max_width`/`max_height` (pixels). */
export const CANVAS_MAX_SIDE = 10_000;
/**
 * The largest `canvas=WxH` area: 25 MP, half the input bound, since a canvas with an outline and
 * a shadow holds several float planes of its size at once.
 */
export const CANVAS_MAX_PIXELS = 25_000_000;

/**
 * `canvas`: an exact size in pixels, the photo's size (`original`), or the subject's box with its
 * padding (`subject`).
 */
export type CanvasSpec = 'original' | 'subject' | { width: number; height: number };

/**
 * A length of `padding`, `margin` or `outline_width`: pixels, a percentage (of the canvas's width
 * for left/right, its height for top/bottom), or a ratio (the same share written 0 .. 0.49).
 */
export interface Space { value: number; unit: 'px' | '%' | 'ratio' }

export interface Spacing { top: Space; right: Space; bottom: Space; left: Space }

/** Where the subject goes in its free space: 0 left/top, 0.5 centre, 1 right/bottom. */
export interface Align { x: 0 | 0.5 | 1; y: 0 | 0.5 | 1 }

export function parseCanvas(value: unknown, param: string, source: OptionSource): CanvasSpec {
  const what = `WxH (such as 1000x1000, each side 1 to ${CANVAS_MAX_SIDE}, at most ${CANVAS_MAX_PIXELS / 1e6} MP), original or subject`;
  const list = words(value);
  if (list?.length === 1) {
    const w = list[0].toLowerCase();
    if (w === 'original' || w === 'originalimage') return 'original';
    if (w === 'subject' || w === 'croppedsubject') return 'subject';
    const m = /^(\d{1,5})x(\d{1,5})$/.exec(w);
    if (m) {
      const width = Number(m[1]), height = Number(m[2]);
      if (width >= 1 && height >= 1 && width <= CANVAS_MAX_SIDE && height <= CANVAS_MAX_SIDE && width * height <= CANVAS_MAX_PIXELS) return { width, height };
    }
  }
  throw refuse(param, source, what, value);
}

export function canvasToText(c: CanvasSpec): string {
  return typeof c === 'string' ? c : `${c.width}x${c.height}`;
}

/** A side in pixels for `max_width` / `max_height`: an integer from 1 to CANVAS_MAX_SIDE. */
export function parseSide(value: unknown, param: string, source: OptionSource): number {
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim().replace(/px$/i, '') : '';
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= CANVAS_MAX_SIDE)) throw refuse(param, source, `a whole number of pixels from 1 to ${CANVAS_MAX_SIDE}`, value);
  return n;
}

/** One `padding`/`margin` word: `NNpx` (a bare number above 0.49 too), `NN%` (below 50) or a ratio 0 .. 0.49. */
export function parseSpace(word: string, maxRatio = 0.49, maxPx = CANVAS_MAX_SIDE): Space | null {
  const m = /^(\d+(?:\.\d+)?|\.\d+)(px|%)?$/i.exec(word.trim());
  if (!m) return null;
  const value = Number(m[1]);
  const unit = m[2]?.toLowerCase();
  if (unit === '%') return value <= maxRatio * 100 ? { value, unit: '%' } : null;
  if (unit === 'px') return value <= maxPx ? { value, unit: 'px' } : null;
  // A bare number: a ratio up to maxRatio (Photoroom's number form), else pixels.
  if (value <= maxRatio) return { value, unit: 'ratio' };
  return Number.isInteger(value) && value <= maxPx ? { value, unit: 'px' } : null;
}

/** `padding` / `margin`: 1 to 4 values in CSS order (all; vertical horizontal; top horizontal bottom; top right bottom left). */
export function parseSpacing(value: unknown, param: string, source: OptionSource): Spacing {
  const what = '1 to 4 values, each NNpx, NN% (below 50%) or a ratio from 0 to 0.49, such as 10%, 0.1 or "40px 5%"';
  const list = words(value)?.map((w) => parseSpace(w));
  if (!list || list.length > 4 || list.some((s) => s === null)) throw refuse(param, source, what, value);
  const s = list as Space[];
  const [top, right = top, bottom = top, left = right] = s;
  return { top, right, bottom, left };
}

export function spaceToText(s: Space): string {
  return s.unit === 'ratio' ? String(s.value) : `${s.value}${s.unit}`;
}

export function spacingToText(s: Spacing): string {
  return [s.top, s.right, s.bottom, s.left].map(spaceToText).join(' ');
}

/** `align`: center, top, bottom, left, right, or one horizontal and one vertical word in either order. */
export function parseAlign(value: unknown, param: string, source: OptionSource): Align {
  const what = 'center, top, bottom, left, right, or two words such as "bottom left"';
  const list = words(value)?.map((w) => w.toLowerCase().replace(/^centre$/, 'center'));
  let x: Align['x'] | undefined, y: Align['y'] | undefined;
  for (const w of list && list.length <= 2 ? list : ['?']) {
    if (w === 'left' && x === undefined) x = 0;
    else if (w === 'right' && x === undefined) x = 1;
    else if (w === 'top' && y === undefined) y = 0;
    else if (w === 'bottom' && y === undefined) y = 1;
    else if (w === 'center' || w === 'middle') continue;
    else throw refuse(param, source, what, value);
  }
  return { x: x ?? 0.5, y: y ?? 0.5 };
}

export function alignToText(a: Align): string {
  const h = a.x === 0 ? 'left' : a.x === 1 ? 'right' : 'center';
  const v = a.y === 0 ? 'top' : a.y === 1 ? 'bottom' : 'center';
  return `${v} ${h}`;
}

/** `outline_width`: pixels (`NNpx` or a whole number above 0.1) or a ratio of the canvas's long side, 0 to 0.1. */
export function parseOutlineWidth(value: unknown, param: string, source: OptionSource): Space {
  const list = words(value);
  const s = list?.length === 1 ? parseSpace(list[0], 0.1, 500) : null;
  if (!s || s.unit === '%') throw refuse(param, source, 'a width in pixels (such as 8px, at most 500px) or a ratio of the long side from 0 to 0.1', value);
  return s;
}
