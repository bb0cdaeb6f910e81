/**
 * The image parameters of v1 (api-spec 2.1): exactly one image source (an upload, base64 or a
 * URL) and the options, read from a multipart or JSON body. The transport is http.ts's.
 */
import type { IncomingMessage } from 'node:http';
import { CutoutError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import { API_DEFAULTS, OPTION_PARAMS, parseImageOptions, UNSUPPORTED_PARAMS, type ImageOptions } from '../../options.js';
import { mediaType, readJsonObject, readMultipart, tooLarge } from '../http.js';

export type ImageSource =
  | { kind: 'image_file'; bytes: Buffer; description: string }
  | { kind: 'image_file_b64'; bytes: Buffer; description: string }
  | { kind: 'image_url'; url: string; description: string };

export interface ImageRequest {
  options: ImageOptions;
  source: ImageSource;
  /** An uploaded background picture (`bg_image_file`, multipart, `/remove` only). */
  background?: Buffer;
}

/** The multipart file fields: the image, and on `/remove` a background picture. */
export const FILE_PARAMS = ['image_file', 'bg_image_file'] as const;

export const SOURCE_PARAMS = ['image_file', 'image_url', 'image_file_b64'] as const;
/** The image options' parameters (api-spec 2.1 and the additions within v1), from the options table. */
export { OPTION_PARAMS };
const KNOWN_PARAMS = new Set<string>([...SOURCE_PARAMS, ...OPTION_PARAMS]);

/** invalid_request about one parameter (a batch item's 422 names it in `loc`). */
function invalid(param: string, message: string): CutoutError {
  return new CutoutError('invalid_request', message, { param });
}

function decodeBase64(value: unknown): Buffer {
  if (typeof value !== 'string') throw invalid('image_file_b64', 'Expected a base64 string for image_file_b64.');
  // A data: URL prefix is accepted (browsers' FileReader produces one).
  const b64 = value.replace(/^data:[^,]*;base64,/i, '').replace(/\s+/g, '');
  if (b64 === '') throw invalid('image_file_b64', 'image_file_b64 is empty.');
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(b64)) throw invalid('image_file_b64', 'image_file_b64 is not valid base64.');
  if (Math.floor((b64.length * 3) / 4) > LIMITS.maxInputBytes + 2) throw tooLarge('image_file_b64', 'image_file_b64');
  return Buffer.from(b64, 'base64');
}

function describeUrl(url: unknown): string {
  try {
    return `url ${new URL(String(url)).host}`;
  } catch {
    return 'url';
  }
}

/**
 * Checks parameter names and picks exactly one image source. `params` holds one value per name
 * (null and undefined count as absent); `file` is the uploaded image_file, if any.
 */
export function parseImageParams(params: Record<string, unknown>, file?: Buffer, background?: Buffer): ImageRequest {
  for (const name of Object.keys(params)) {
    if (name === 'bg_image_file') throw invalid(name, 'bg_image_file must be a multipart file upload; give a picture by URL as bg_image_url.');
    // `param` names the field for a batch item's 422 `loc`.
    if ((UNSUPPORTED_PARAMS as readonly string[]).includes(name)) {
      throw invalid(name, `Parameter ${name} is not supported by this service.`);
    }
    if (!KNOWN_PARAMS.has(name)) throw invalid(name, `Unknown parameter ${name}.`);
  }
  if (params.image_file !== undefined && params.image_file !== null) {
    throw invalid('image_file', 'image_file must be a multipart file upload; send base64 as image_file_b64.');
  }
  const present = SOURCE_PARAMS.filter((name) => (name === 'image_file' ? file !== undefined : params[name] !== undefined && params[name] !== null));
  if (present.length !== 1) {
    // Named after the first source listed (none given: image_file, the first of the three).
    throw invalid(
      present[0] ?? 'image_file',
      present.length === 0
        ? 'Give exactly one image source: image_file, image_url or image_file_b64.'
        : `Give exactly one image source; received ${present.join(' and ')}.`,
    );
  }
  const raw: Record<string, unknown> = {};
  for (const name of OPTION_PARAMS) if (params[name] !== null) raw[name] = params[name];
  const options = parseImageOptions(raw, 'api', API_DEFAULTS);
  // No format named: an animation is answered as animated WebP (options.ts, formatByDefault).
  if (raw.format === undefined) options.formatByDefault = true;

  let source: ImageSource;
  if (present[0] === 'image_file') {
    if (file!.length > LIMITS.maxInputBytes) throw tooLarge('image_file', 'image_file');
    source = { kind: 'image_file', bytes: file!, description: 'upload' };
  } else if (present[0] === 'image_file_b64') {
    source = { kind: 'image_file_b64', bytes: decodeBase64(params.image_file_b64), description: 'base64' };
  } else {
    if (typeof params.image_url !== 'string' || params.image_url.trim() === '') throw invalid('image_url', 'Expected a URL string for image_url.');
    source = { kind: 'image_url', url: params.image_url.trim(), description: describeUrl(params.image_url) };
  }
  if (background !== undefined) {
    if (options.bgImage !== undefined) throw invalid('bg_image_file', 'Give one background picture; received bg_image_file and bg_image_url.');
    if (background.length > LIMITS.maxInputBytes) throw tooLarge('bg_image_file', 'bg_image_file');
    return { options, source, background };
  }
  return { options, source };
}

/**
 * Reads the image parameters of a /remove or /jobs request, multipart or JSON. `backgroundFile`:
 * the route takes an uploaded background picture (`/remove`; a job's stored input is one image).
 */
export async function readImageRequest(req: IncomingMessage, { backgroundFile = false } = {}): Promise<ImageRequest> {
  const type = mediaType(req);
  if (type === 'multipart/form-data') {
    // Two files at most on either route, so that /jobs can say why it refuses bg_image_file.
    const { fields, files } = await readMultipart(req, { maxFiles: FILE_PARAMS.length });
    const params: Record<string, unknown> = {};
    for (const [name, values] of Object.entries(fields)) {
      if (values.length > 1) throw new CutoutError('invalid_request', `Parameter ${name} was given more than once.`);
      params[name] = values[0];
    }
    const fileNames = Object.keys(files);
    for (const name of fileNames) {
      if (name === 'bg_image_file' && !backgroundFile) {
        throw invalid(name, 'A job takes its background picture by URL (bg_image_url); bg_image_file is taken by POST /api/v1/remove.');
      }
      if (!(FILE_PARAMS as readonly string[]).includes(name)) throw new CutoutError('invalid_request', `Unexpected file field ${name}; upload the image as image_file.`);
      if (files[name].length > 1) throw invalid(name, `${name} was given more than once.`);
    }
    if (params.image_file !== undefined) throw new CutoutError('invalid_request', 'image_file must be a file upload, not a text field.');
    if (params.bg_image_file !== undefined) throw invalid('bg_image_file', 'bg_image_file must be a file upload, not a text field.');
    return parseImageParams(params, files.image_file?.[0], files.bg_image_file?.[0]);
  }
  if (type === 'application/json') return parseImageParams(await readJsonObject(req));
  req.resume();
  throw new CutoutError('invalid_request', `Expected a multipart/form-data or application/json body but received ${JSON.stringify(type || 'none')}.`);
}

