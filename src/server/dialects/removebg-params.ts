/**
 * remove.bg's request (docs/removebg.md): its three body encodings (multipart, urlencoded, JSON),
 * its value forms (empty strings as absent, JSON and string booleans) and its parameters, read
 * into cutout's own pipeline request. Unknown parameters are ignored, as remove.bg's clients
 * (Zapier, the official CLI) send fields of their own. Errors are OptionErrors naming the
 * parameter (and a finer `reason` where remove.bg has one), which the dialect's error renderer
 * turns into remove.bg's codes.
 */
import type { IncomingMessage } from 'node:http';
import { CutoutError, type ErrorReason } from '../../errors.js';
import { parseCropMargin, parsePosition, parseRoi, parseScale } from '../../layout-options.js';
import { LIMITS } from '../../limits.js';
import { OptionError, parseBoolean, parseColor, parseEnum, PRECISIONS, QUALITIES, type Size } from '../../options.js';
import type { RemoveRequest, RequestFormat } from '../../pipeline/types.js';
import { mediaType, readCappedBody, readJsonObject, readMultipart, tooLarge } from '../http.js';

/** remove.bg's sizes: the cutout size it is priced as, and the largest output area. */
export const REMOVEBG_SIZES: Readonly<Record<string, { size: Size; maxArea: number }>> = Object.freeze({
  preview: { size: 'preview', maxArea: LIMITS.removebgPreviewPixels },
  small: { size: 'preview', maxArea: LIMITS.removebgPreviewPixels },
  regular: { size: 'preview', maxArea: LIMITS.removebgPreviewPixels },
  medium: { size: 'full', maxArea: 1_500_000 },
  hd: { size: 'full', maxArea: 4_000_000 },
  full: { size: 'full', maxArea: LIMITS.removebgFullPixels },
  '4k': { size: 'full', maxArea: LIMITS.removebgFullPixels },
  auto: { size: 'full', maxArea: LIMITS.removebgFullPixels },
  '50mp': { size: 'full', maxArea: LIMITS.maxInputPixels },
});

/** remove.bg's `type` values (S1 and S2 of removebg-api.md): a hint, echoed in X-Type. */
export const REMOVEBG_TYPES = ['auto', 'person', 'product', 'car', 'animal', 'graphic', 'graphics', 'transportation', 'car_interior', 'car_part'] as const;
export const REMOVEBG_FORMATS = ['auto', 'png', 'jpg', 'zip', 'webp'] as const;

export type RemoveBgSource =
  | { kind: 'bytes'; bytes: Buffer; description: string }
  | { kind: 'url'; url: string; description: string };

export interface RemoveBgRequest {
  /** What the pipeline is asked; `bgImageData` is filled by the route once the background is fetched. */
  request: RemoveRequest;
  /** `auto`: the size is chosen from the image (a preview when it is no larger than one). */
  autoSize: boolean;
  source: RemoveBgSource;
  background: RemoveBgSource | null;
  /** The X-Type header's value; null under `type_level=none`. */
  xType: string | null;
}

/** One value per name; files apart. Empty strings and nulls are absent (the official CLI sends every field). */
type Params = Record<string, unknown>;

function present(params: Params, name: string): boolean {
  const v = params[name];
  return v !== undefined && v !== null && !(typeof v === 'string' && v.trim() === '');
}

function decodeBase64(value: unknown): Buffer {
  if (typeof value !== 'string') throw new OptionError('image_file_b64', 'Expected a base64 string for image_file_b64', 'failed_to_read_image');
  // A data: URL prefix is accepted (whether remove.bg does is unknown; removd strips its own).
  const b64 = value.replace(/^data:[^,]*;base64,/i, '').replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(b64)) throw new OptionError('image_file_b64', 'image_file_b64 is not valid base64', 'failed_to_read_image');
  if (Math.floor((b64.length * 3) / 4) > LIMITS.maxInputBytes + 2) throw tooLarge('image_file_b64');
  return Buffer.from(b64, 'base64');
}

function urlSource(params: Params, name: string, code: ErrorReason): RemoveBgSource {
  const raw = params[name];
  if (typeof raw !== 'string') throw new OptionError(name, `Expected a URL string for ${name}`, code);
  let host: string;
  try {
    const url = new URL(raw.trim());
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
    host = url.host;
  } catch {
    throw new OptionError(name, `${name} is not a valid http(s) URL`, code);
  }
  return { kind: 'url', url: raw.trim(), description: `url ${host}` };
}

/** Exactly one image source: `missing_source` / `multiple_sources` otherwise. */
function imageSource(params: Params, file: Buffer | undefined): RemoveBgSource {
  const given = [file ? 'image_file' : null, present(params, 'image_file_b64') ? 'image_file_b64' : null, present(params, 'image_url') ? 'image_url' : null].filter(Boolean);
  if (given.length === 0) throw new OptionError('image_file', 'No image given: send image_file, image_file_b64 or image_url', 'missing_source');
  if (given.length > 1) throw new OptionError('image_file', `Give one image source; received ${given.join(' and ')}`, 'multiple_sources');
  if (file) {
    if (file.length > LIMITS.maxInputBytes) throw tooLarge('image_file');
    return { kind: 'bytes', bytes: file, description: 'upload' };
  }
  if (given[0] === 'image_file_b64') return { kind: 'bytes', bytes: decodeBase64(params.image_file_b64), description: 'base64' };
  return urlSource(params, 'image_url', 'invalid_image_url');
}

/** At most one background: a colour, a picture by URL, or an uploaded one (`multiple_bg_sources`). */
function backgroundSource(params: Params, file: Buffer | undefined): RemoveBgSource | null {
  const given = [present(params, 'bg_color') ? 'bg_color' : null, present(params, 'bg_image_url') ? 'bg_image_url' : null, file ? 'bg_image_file' : null].filter(Boolean);
  if (given.length > 1) throw new OptionError('bg_color', `Give one background; received ${given.join(' and ')}`, 'multiple_bg_sources');
  if (file) return { kind: 'bytes', bytes: file, description: 'bg upload' };
  if (given[0] === 'bg_image_url') return urlSource(params, 'bg_image_url', 'invalid_bg_image_url');
  return null;
}

/** The parameters, checked, as cutout's request. */
export function parseRemoveBgParams(params: Params, files: { image?: Buffer; background?: Buffer } = {}): RemoveBgRequest {
  const given = (name: string) => present(params, name);
  const source = imageSource(params, files.image);
  const background = backgroundSource(params, files.background);
  const sizeName = given('size') ? String(params.size).trim().toLowerCase() : 'preview';
  const size = REMOVEBG_SIZES[sizeName];
  if (!size) throw new OptionError('size', `Expected one of ${Object.keys(REMOVEBG_SIZES).map((s) => (s === '50mp' ? '50MP' : s)).join(', ')} for size but received ${JSON.stringify(params.size)}`);
  const type = given('type') ? parseEnum('type', REMOVEBG_TYPES, params.type, 'api') : 'auto';
  const typeLevel = given('type_level') ? parseEnum('type_level', ['none', '1', '2', 'latest'] as const, String(params.type_level), 'api') : '1';
  const formatName = given('format') ? (String(params.format).trim().toLowerCase() === 'jpeg' ? 'jpg' : params.format) : 'auto';
  const format: RequestFormat = parseEnum('format', REMOVEBG_FORMATS, formatName, 'api');
  const channels = given('channels') ? parseEnum('channels', ['rgba', 'alpha'] as const, params.channels, 'api') : 'rgba';
  // Accepted and checked, but without effect (docs/removebg.md): cutout's mattes are always soft
  // where the photo is, and its one shadow for remove.bg is the same whatever the method.
  if (given('semitransparency')) parseBoolean('semitransparency', params.semitransparency, 'api');
  if (given('shadow_method')) parseEnum('shadow_method', ['latest', 'legacy'] as const, params.shadow_method, 'api');
  const crop = given('crop') ? parseBoolean('crop', params.crop, 'api') : false;
  const request: RemoveRequest = {
    // The hosted APIs answer stills: an animation's first frame, as before issue 55 (docs/http-api.md, "Animations").
    animation: 'first',
    size: size.size,
    maxArea: size.maxArea,
    format,
    mask: channels === 'alpha',
    bgColor: given('bg_color') ? parseColor(params.bg_color, 'api') : null,
    crop,
    cropMargin: crop && given('crop_margin') ? parseCropMargin(params.crop_margin, 'api') : undefined,
    roi: given('roi') ? parseRoi(params.roi, 'api') : undefined,
    scale: given('scale') ? parseScale(params.scale, 'api') : undefined,
    position: given('position') ? parsePosition(params.position, 'api') : undefined,
    // remove.bg draws car shadows only; cutout draws its `float` shadow under every subject.
    addShadow: given('add_shadow') ? parseBoolean('add_shadow', params.add_shadow, 'api') : undefined,
    // cutout's own additions, for callers that know them.
    quality: given('quality') ? parseEnum('quality', QUALITIES, params.quality, 'api') : undefined,
    precision: given('precision') ? parseEnum('precision', PRECISIONS, params.precision, 'api') : undefined,
  };
  // A margin without crop is checked all the same (a bad value is an error either way).
  if (!crop && given('crop_margin')) parseCropMargin(params.crop_margin, 'api');
  return { request, autoSize: sizeName === 'auto', source, background, xType: typeLevel === 'none' ? null : type === 'auto' ? 'other' : type };
}

/** Reads `POST /v1.0/removebg`'s body in any of its three encodings. */
export async function readRemoveBgRequest(req: IncomingMessage): Promise<RemoveBgRequest> {
  const type = mediaType(req);
  if (type === 'multipart/form-data') {
    const { fields, files } = await readMultipart(req, { maxFiles: 2 });
    const params: Params = {};
    // A repeated field counts once, its first value (what form parsers of most frameworks do).
    for (const [name, values] of Object.entries(fields)) params[name] = values[0];
    return parseRemoveBgParams(params, { image: files.image_file?.[0], background: files.bg_image_file?.[0] });
  }
  if (type === 'application/x-www-form-urlencoded') {
    const body = await readCappedBody(req, LIMITS.maxJsonBytes);
    const params: Params = {};
    for (const [name, value] of new URLSearchParams(body.toString('utf8'))) if (!(name in params)) params[name] = value;
    return parseRemoveBgParams(params);
  }
  if (type === 'application/json') return parseRemoveBgParams(await readJsonObject(req));
  req.resume();
  if (type === '') throw new OptionError('image_file', 'No image given: send a multipart, urlencoded or JSON body with image_file, image_file_b64 or image_url', 'missing_source');
  throw new CutoutError('invalid_request', `Expected a multipart/form-data, application/x-www-form-urlencoded or application/json body but received ${JSON.stringify(type)}`);
}
