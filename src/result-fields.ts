/**
 * What a result says of itself beside its bytes, described once, as the options are in
 * OPTION_TABLE: the record (ResultFields) and one table of where each field goes. Every door reads
 * the table: the CLI's `--json` line and the manifest's line, the v1 API's sync answer (a header;
 * its JSON metadata stays api-spec 2.2's, exactly), a job's record and its callback body (kept in the job's
 * `result_fields` JSON column, so that a new field needs no migration), remove.bg's and rembg's
 * answers (the header), the OpenAPI document, and the playground (which reads the header or the
 * record). Adding a field is adding it to ResultFields, to ResultFieldsOf's source, and a row.
 */

/** The result's fields that travel beside its bytes. */
export interface ResultFields {
  /** 0..1, 1: sure (pipeline/confidence.ts): ranks cutouts by how likely they are to be wrong. */
  confidence: number;
}

/** One field: where it goes, and how it is written. */
export interface ResultFieldRow<K extends keyof ResultFields = keyof ResultFields> {
  key: K;
  /** Its key in JSON: each `--json` line and manifest line of a done input, a done job's record and callback body. */
  json: string;
  /** The response header of every door's sync answer (v1, remove.bg's, rembg's), or null. */
  header: string | null;
  /** The header's text. */
  text(value: ResultFields[K]): string;
  /** The OpenAPI components: the header's and the JSON property's schema. */
  openapi: { name: string; schema: Record<string, unknown> };
}

function row<K extends keyof ResultFields>(r: ResultFieldRow<K>): ResultFieldRow<K> {
  return r;
}

export const RESULT_FIELDS: readonly ResultFieldRow[] = Object.freeze([
  row({
    key: 'confidence', json: 'confidence', header: 'X-Cutout-Confidence',
    text: (value) => value.toFixed(3),
    openapi: {
      name: 'Confidence',
      schema: {
        type: 'number', minimum: 0, maximum: 1, examples: [0.962],
        description: 'How sure cutout is of this cutout, 0 to 1 (1: sure), computed from the matte on every removal. It ranks cutouts by how likely they are to be wrong: review the least confident first. On the public test set it reads as the chance that the cutout is good (IoU >= 0.9); docs/models.md, "Confidence", has what a threshold catches.',
      },
    },
  }),
]);

/** The fields of a pipeline result (its confidence, ...). */
export function resultFieldsOf(result: { confidence: number }): ResultFields {
  return { confidence: result.confidence };
}

/** The fields as JSON keys (a `--json` line, a manifest line, a job record and callback). */
export function resultJson(fields: Partial<ResultFields> | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!fields) return out;
  for (const r of RESULT_FIELDS) if (fields[r.key] !== undefined) out[r.json] = fields[r.key];
  return out;
}

/** The fields as response headers (every door's sync answer). */
export function resultHeaders(fields: Partial<ResultFields> | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!fields) return out;
  for (const r of RESULT_FIELDS) {
    const value = fields[r.key];
    if (r.header && value !== undefined) out[r.header] = (r.text as (v: unknown) => string)(value);
  }
  return out;
}

/** The header names, for the dialects' CORS `Access-Control-Expose-Headers`. */
export const RESULT_HEADERS: readonly string[] = Object.freeze(RESULT_FIELDS.flatMap((r) => (r.header ? [r.header] : [])));

/** Reads fields back from a stored JSON column (a job's `result_fields`); unknown keys are ignored. */
export function parseResultFields(text: string | null): Partial<ResultFields> | null {
  if (!text) return null;
  try {
    const raw = JSON.parse(text) as Record<string, unknown>;
    const out: Partial<Record<keyof ResultFields, unknown>> = {};
    for (const r of RESULT_FIELDS) if (raw[r.json] !== undefined) out[r.key] = raw[r.json];
    return out as Partial<ResultFields>;
  } catch {
    return null; // a column that cannot be read says nothing: the record goes out without it
  }
}
