/**
 * rembg's parameters (docs/removebg.md "rembg's API", http-api.md's table) read into cutout's
 * request, and FastAPI's validation failure for a bad one: a 422 naming where the parameter was
 * (`query` or `body`). The door is api-rembg.ts.
 */
import { OptionError, type Rgb } from '../../options.js';
import type { RemoveRequest } from '../../pipeline/types.js';

/** rembg's session names (R1 `rembg/sessions/*.py`): each runs cutout's model here. */
export const REMBG_MODELS = [
  'u2net', 'u2netp', 'u2net_human_seg', 'u2net_cloth_seg', 'u2net_custom', 'silueta', 'isnet-general-use', 'isnet-anime',
  'dis_custom', 'sam', 'birefnet-general', 'birefnet-general-lite', 'birefnet-portrait', 'birefnet-dis', 'birefnet-hrsod',
  'birefnet-cod', 'birefnet-massive', 'bria-rmbg', 'ben_custom',
] as const;

/** A FastAPI validation failure: 422 `{"detail": [{loc, msg, type}]}`. */
export class RembgValidationError extends OptionError {
  constructor(readonly where: 'query' | 'body', param: string, msg: string, readonly type = 'value_error') {
    super(param, msg);
  }
}

function bool(where: 'query' | 'body', name: string, value: string | undefined): boolean | undefined {
  if (value === undefined || value === '') return undefined;
  const v = value.trim().toLowerCase();
  if (['true', '1', 'yes', 'on', 't', 'y'].includes(v)) return true;
  if (['false', '0', 'no', 'off', 'f', 'n'].includes(v)) return false;
  throw new RembgValidationError(where, name, 'Input should be a valid boolean, unable to interpret input', 'bool_parsing');
}

function int(where: 'query' | 'body', name: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new RembgValidationError(where, name, 'Input should be a valid integer, unable to parse string as an integer', 'int_parsing');
  if (n < min) throw new RembgValidationError(where, name, `Input should be greater than or equal to ${min}`, 'greater_than_equal');
  if (n > max) throw new RembgValidationError(where, name, `Input should be less than or equal to ${max}`, 'less_than_equal');
  return n;
}

/** `bgc`: "R,G,B,A", each 0..255, as rembg parses it (a tuple of ints). */
function backgroundColor(value: string | undefined): Rgb | null {
  if (value === undefined || value === '') return null;
  const parts = value.split(',').map((p) => Number(p.trim()));
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) {
    throw new RembgValidationError('query', 'bgc', 'Expected four integers from 0 to 255: "R,G,B,A"');
  }
  const [r, g, b, a] = parts;
  if (a === 0) return null;
  return a === 255 ? { r, g, b } : { r, g, b, a };
}

/** rembg's parameters (query for GET; form fields, with `bgc` and `extras` in the query, for POST) as cutout's request. */
export function rembgRequest(get: (name: string) => { value: string | undefined; where: 'query' | 'body' }): RemoveRequest {
  const model = get('model');
  if (model.value !== undefined && model.value !== '' && !(REMBG_MODELS as readonly string[]).includes(model.value)) {
    throw new RembgValidationError(model.where, 'model', `Input should be one of ${REMBG_MODELS.join(', ')}`, 'string_pattern_mismatch');
  }
  // Alpha matting (a, af, ab, ae) is checked and left to cutout's own edge refinement, always on.
  bool(get('a').where, 'a', get('a').value);
  int(get('af').where, 'af', get('af').value, 0, 255);
  int(get('ab').where, 'ab', get('ab').value, 0, 255);
  int(get('ae').where, 'ae', get('ae').value, 0, Number.MAX_SAFE_INTEGER);
  const onlyMask = bool(get('om').where, 'om', get('om').value) ?? false;
  const postProcess = bool(get('ppm').where, 'ppm', get('ppm').value) ?? false;
  const bgColor = onlyMask ? null : backgroundColor(get('bgc').value);
  // The hosted APIs answer stills: an animation's first frame, as before issue 55 (docs/http-api.md, "Animations").
  return { size: 'full', format: 'png', bgColor, crop: false, mask: onlyMask, alpha: postProcess ? 'hard' : 'soft', animation: 'first' };
}
