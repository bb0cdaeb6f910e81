/**
 * What a result says of itself beside its bytes, described once, as the options are in
 * OPTION_TABLE: the record (ResultFields: the size, the subject's box, the confidence, the time)
 * and one table (RESULT_FIELDS) of where each field goes. Every door reads the table:
 *   - the CLI's `--json` line and the manifest's line (`json`, `manifest`);
 *   - a done job's record and its callback body, and the `result_fields` JSON column of jobs and
 *     of results (`json`: one column, so that a new field needs no migration);
 *   - each dialect's response headers (`headers`: v1's `X-Cutout-Confidence`, remove.bg's
 *     `X-Width` and `X-Foreground-*`, Photoroom's `x-uncertainty-score`, ...) and their CORS
 *     exposure; v1's JSON metadata stays api-spec 2.2's, exactly (routes-remove.ts);
 *   - the JSON bodies whose keys a contract fixes (`body`: remove.bg's `data.foreground_*`);
 *   - the library's result (CutoutResult extends ResultFields), and the OpenAPI document.
 * Adding a field is adding it to ResultFields and a row here (docs/internals.md, "Result fields"):
 * the table is keyed by field, so the compiler refuses a field without its row.
 *
 * Every helper takes the table as a parameter (RESULT_FIELDS by default), as outputOptions takes
 * OPTION_TABLE, so that a test can hand them a made-up row and see it reach every door.
 */
import type { RemoveResult } from './pipeline/types.js';

/** The HTTP dialects whose answers to a removal carry fields as headers. */
export type Dialect = 'v1' | 'removebg' | 'rembg' | 'photoroom' | 'clipdrop';
export const DIALECTS: readonly Dialect[] = Object.freeze(['v1', 'removebg', 'rembg', 'photoroom', 'clipdrop'] as const);

/** What a cutout says of itself beside its bytes (each field is one row of RESULT_FIELDS). */
export interface ResultFields {
  /** The result's width in pixels. */
  width: number;
  /** The result's height in pixels. */
  height: number;
  /** The subject's bounding box in the result, in its pixels: its top edge (the whole result when no box is found). */
  foregroundTop: number;
  /** The subject's box: its left edge. */
  foregroundLeft: number;
  /** The subject's box: its width. */
  foregroundWidth: number;
  /** The subject's box: its height. */
  foregroundHeight: number;
  /**
   * How sure cutout is of this cutout, 0 to 1 (1: sure): it ranks cutouts by how likely they are
   * to be wrong, so that a reviewer looks at the least confident first (docs/models.md, "Confidence").
   */
  confidence: number;
  /** Milliseconds the removal itself took (decode, model, matte, encode), as v1's `processing_ms`. */
  processingMs: number;
  /** Frames in the result: an animation cut out whole has its input's count; a still picture 1. */
  frames: number;
}

/** A header that carries a field: its name (with the row's text), or a name and a text of its own. */
export type FieldHeader<V> = string | { readonly name: string; readonly text: (value: V) => string };

/** One field and every place it goes. */
export interface ResultFieldRow<K extends keyof ResultFields = keyof ResultFields> {
  readonly key: K;
  /** Its value in a pipeline result: where every door gets it. */
  readonly of: (result: RemoveResult) => ResultFields[K];
  /**
   * Its key in cutout's own JSON: each `--json` line of a done input, a done job's record and its
   * callback body, and the stored `result_fields` columns (renaming it orphans stored values).
   */
  readonly json: string;
  /** Its key on a manifest line of a done input; null: not recorded there. */
  readonly manifest: string | null;
  /** Per dialect, the headers of a removal's answer that carry it, in order; a dialect not named sends none. */
  readonly headers: { readonly [D in Dialect]?: readonly FieldHeader<ResultFields[K]>[] };
  /** A header's text (unless the header has its own). */
  readonly text: (value: ResultFields[K]) => string;
  /** Its key in a dialect's JSON body whose keys its contract fixes (remove.bg's `data`); absent: not there. */
  readonly body?: { readonly removebg?: string };
  /** Its OpenAPI component: the schema of the JSON property (and of v1's header, when it has one). */
  readonly openapi: { readonly name: string; readonly schema: Record<string, unknown> };
}

/** The table as the helpers read it: rows of any field (a test's made-up one included). */
export type ResultFieldTable = readonly ResultFieldRow[];

/** Keeps each row's value type tied to its key. */
function row<K extends keyof ResultFields>(r: ResultFieldRow<K>): ResultFieldRow<K> {
  return Object.freeze(r);
}

/**
 * The table from one row per field, keyed by the field: the compiler refuses a field of
 * ResultFields without a row, a row under another field's key, or a row for no field.
 */
function tableOf(rows: { readonly [K in keyof ResultFields]: ResultFieldRow<K> }): ResultFieldTable {
  return Object.freeze(Object.values(rows) as unknown as ResultFieldRow[]);
}

/** Photoroom's score: 0 sure, 1 unsure; cutout's is 1 - its confidence, for every image. */
function uncertaintyText(confidence: number): string {
  return String(Number((1 - confidence).toFixed(3)));
}

const pixels = (what: string, min: number) => ({ type: 'integer', minimum: min, examples: [min === 0 ? 12 : 800], description: what });
const boxSide = (side: string, removebg: string) =>
  `The ${side} of the subject's bounding box in the result, in its pixels (remove.bg's \`${removebg}\`); the whole result when no box is found.`;

/**
 * A side of the subject's box: remove.bg's names for it (`X-Foreground-Top`, `foreground_top`)
 * are the same in cutout's JSON, the manifest, the header and remove.bg's `data`.
 */
function boxRow<K extends 'foregroundTop' | 'foregroundLeft' | 'foregroundWidth' | 'foregroundHeight'>(key: K, side: 'top' | 'left' | 'width' | 'height', what: string): ResultFieldRow<K> {
  const name = `foreground_${side}`;
  const title = side[0].toUpperCase() + side.slice(1);
  return row({
    key, of: (r) => r.foreground[side], json: name, manifest: name, text: String,
    headers: { removebg: [`X-Foreground-${title}`] }, body: { removebg: name },
    openapi: { name: `Foreground${title}`, schema: pixels(boxSide(what, name), 0) },
  });
}

export const RESULT_FIELDS: ResultFieldTable = tableOf({
  width: row({
    key: 'width', of: (r) => r.width, json: 'width', manifest: 'width', text: String,
    headers: { removebg: ['X-Width', 'X-Max-Width'] },
    openapi: { name: 'ResultWidth', schema: pixels('The result\'s width in pixels.', 1) },
  }),
  height: row({
    key: 'height', of: (r) => r.height, json: 'height', manifest: 'height', text: String,
    headers: { removebg: ['X-Height', 'X-Max-Height'] },
    openapi: { name: 'ResultHeight', schema: pixels('The result\'s height in pixels.', 1) },
  }),
  foregroundTop: boxRow('foregroundTop', 'top', 'top edge'),
  foregroundLeft: boxRow('foregroundLeft', 'left', 'left edge'),
  foregroundWidth: boxRow('foregroundWidth', 'width', 'width'),
  foregroundHeight: boxRow('foregroundHeight', 'height', 'height'),
  confidence: row({
    key: 'confidence', of: (r) => r.confidence, json: 'confidence', manifest: 'confidence',
    text: (value) => value.toFixed(3),
    headers: {
      v1: ['X-Cutout-Confidence'],
      removebg: ['X-Cutout-Confidence'],
      rembg: ['X-Cutout-Confidence'],
      // Photoroom's own score first (hosted-apis.md), then cutout's.
      photoroom: [{ name: 'x-uncertainty-score', text: uncertaintyText }, 'X-Cutout-Confidence'],
      clipdrop: ['X-Cutout-Confidence'],
    },
    openapi: {
      name: 'Confidence',
      schema: {
        type: 'number', minimum: 0, maximum: 1, examples: [0.962],
        description: 'How sure cutout is of this cutout, 0 to 1 (1: sure), computed from the matte on every removal. It ranks cutouts by how likely they are to be wrong: review the least confident first. On the public test set it reads as the chance that the cutout is good (IoU >= 0.9); docs/models.md, "Confidence", has what a threshold catches.',
      },
    },
  }),
  processingMs: row({
    // v1's name for the same number (api-spec 2.2); the CLI's `ms` is the whole input's time (read, removed, written).
    key: 'processingMs', of: (r) => Math.round(r.ms), json: 'processing_ms', manifest: 'processing_ms', text: String,
    headers: {},
    openapi: { name: 'ProcessingMs', schema: { type: 'integer', minimum: 0, examples: [412], description: 'Milliseconds the removal itself took: decode, model, matte and encode (not the upload, the wait for a worker, or storing the result).' } },
  }),
  frames: row({
    key: 'frames', of: (r) => r.frames, json: 'frames', manifest: 'frames', text: String,
    headers: { v1: ['X-Cutout-Frames'] },
    openapi: { name: 'Frames', schema: { type: 'integer', minimum: 1, examples: [1, 12], description: 'Frames in the result: an animated GIF, WebP or PNG cut out whole (`animation=keep`, the default) has its input\'s frame count and timing; a still picture, or `animation=first`, 1. An animation\'s `confidence` is its lowest frame\'s.' } },
  }),
});

/** The fields of a pipeline result, one per row. */
export function resultFieldsOf(result: RemoveResult, table: ResultFieldTable = RESULT_FIELDS): ResultFields {
  return Object.fromEntries(table.map((r) => [r.key, r.of(result)])) as unknown as ResultFields;
}

/** Fields under the keys `keyOf` gives; a field absent (an older record) or a row without a key is left out. */
function keyed(fields: Partial<ResultFields> | null | undefined, table: ResultFieldTable, keyOf: (r: ResultFieldRow) => string | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!fields) return out;
  for (const r of table) {
    const key = keyOf(r);
    if (key && fields[r.key] !== undefined) out[key] = fields[r.key];
  }
  return out;
}

/** The fields under their JSON keys: a `--json` line, a job's record and callback, the stored columns. */
export function resultJson(fields: Partial<ResultFields> | null | undefined, table: ResultFieldTable = RESULT_FIELDS): Record<string, unknown> {
  return keyed(fields, table, (r) => r.json);
}

/** The fields under their manifest keys (a manifest line of a done input). */
export function manifestFields(fields: Partial<ResultFields> | null | undefined, table: ResultFieldTable = RESULT_FIELDS): Record<string, unknown> {
  return keyed(fields, table, (r) => r.manifest);
}

/** The fields a dialect's fixed JSON body carries, under its keys (remove.bg's `data.foreground_*`). */
export function dialectBody(fields: Partial<ResultFields> | null | undefined, dialect: 'removebg', table: ResultFieldTable = RESULT_FIELDS): Record<string, unknown> {
  return keyed(fields, table, (r) => r.body?.[dialect]);
}

const headerName = (h: FieldHeader<never>): string => (typeof h === 'string' ? h : h.name);

/** The fields as `dialect`'s response headers, in table order. */
export function resultHeaders(fields: Partial<ResultFields> | null | undefined, dialect: Dialect, table: ResultFieldTable = RESULT_FIELDS): Record<string, string> {
  const out: Record<string, string> = {};
  if (!fields) return out;
  for (const r of table) {
    const value = fields[r.key];
    if (value === undefined) continue;
    for (const h of r.headers[dialect] ?? []) {
      const text = (typeof h === 'string' ? r.text : h.text) as (v: unknown) => string;
      out[headerName(h)] = text(value);
    }
  }
  return out;
}

/** The names of `dialect`'s field headers, for its CORS `Access-Control-Expose-Headers`. */
export function resultHeaderNames(dialect: Dialect, table: ResultFieldTable = RESULT_FIELDS): string[] {
  return table.flatMap((r) => (r.headers[dialect] ?? []).map((h) => headerName(h)));
}

/** The text of a stored `result_fields` column (results, jobs): the JSON keys; null when there are none. */
export function storedResultFields(fields: Partial<ResultFields> | null | undefined, table: ResultFieldTable = RESULT_FIELDS): string | null {
  return fields ? JSON.stringify(resultJson(fields, table)) : null;
}

/** Reads a stored `result_fields` column back; keys of no row (a newer server's) are ignored. */
export function parseResultFields(text: string | null | undefined, table: ResultFieldTable = RESULT_FIELDS): Partial<ResultFields> | null {
  if (!text) return null;
  try {
    const raw = JSON.parse(text) as Record<string, unknown>;
    const out: Partial<Record<keyof ResultFields, unknown>> = {};
    for (const r of table) if (raw[r.json] !== undefined) out[r.key] = raw[r.json];
    return out as Partial<ResultFields>;
  } catch {
    return null; // a column that cannot be read says nothing: the record goes out without it
  }
}
