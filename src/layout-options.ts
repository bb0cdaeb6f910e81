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
