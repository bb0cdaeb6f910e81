/**
 * Photoroom's Image Editing API v2 (docs/photoroom.md "/v2/edit"): `POST /v2/edit` (multipart:
 * `imageFile` or `imageUrl`, `background.imageFile`) and `GET /v2/edit?imageUrl=...`, its dotted
 * parameters mapped onto cutout's product-photo options (docs/product-photos.md), each parsed by
 * the option table's own parser under Photoroom's name, so that a bad value's 400 names the
 * parameter as the client sent it. A generative parameter, or a value cutout cannot honour, is
 * refused with 400 naming it: never silently ignored. The answer is the image in `export.format`
 * (PNG by default) with `/v1/segment`'s headers; errors, keys, credits and limits are its.
 */
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LIMITS } from '../../limits.js';
import { fetchImageUrl } from '../../net/fetch-url.js';
import { API_DEFAULTS, OPTION_TABLE, OptionError, type ImageOptions } from '../../options.js';
import type { RemoveRequest } from '../../pipeline/types.js';
import { resultFieldsOf, resultHeaders } from '../../result-fields.js';
import type { ServerContext } from '../context.js';
import type { Caller } from '../guards.js';
import { mediaType, readMultipart, sendBytes } from '../http.js';
import { runSyncRemoval } from '../sync-removal.js';
import { dialectDeadlineMs } from './dialect-kit.js';
import { PHOTOROOM_SIZES } from './photoroom-sizes.js';

type EditContext = Pick<ServerContext, 'config' | 'pool' | 'removals' | 'store'>;

/** Photoroom's name -> the v1 parameter whose table row parses it, the value passed as it is. */
const SAME_VALUE: Readonly<Record<string, string>> = Object.freeze({
  maxWidth: 'max_width', maxHeight: 'max_height', ignorePaddingAndSnapOnCroppedSides: 'snap_cropped',
  'background.color': 'bg_color', 'background.imageUrl': 'bg_image_url', 'background.blur.mode': 'bg_blur_mode',
  'background.blur.radius': 'bg_blur', 'outline.color': 'outline_color', 'outline.width': 'outline_width',
  'outline.blurRadius': 'outline_blur', 'export.dpi': 'dpi', keepExistingAlphaChannel: 'keep_alpha', scaling: 'scaling',
});

/** Parameters Photoroom answers with a generative model (or a template): refused, never ignored. */
const GENERATIVE = ['background.prompt', 'background.negativePrompt', 'background.seed', 'background.guidance.imageUrl', 'background.guidance.imageFile',
  'background.guidance.scale', 'background.expandPrompt', 'lighting.mode', 'textRemoval.mode', 'beautify.mode', 'expand.mode', 'uncrop.mode',
  'upscale.mode', 'segmentation.prompt', 'segmentation.mode', 'templateId', 'shadow.mode=ai.custom'];

/** Values cutout does not draw, by parameter: what it does instead is the error's text. */
const ONLY: Readonly<Record<string, readonly string[]>> = Object.freeze({
  removeBackground: ['true'], referenceBox: ['subjectBox'], 'background.scaling': ['fill'], preserveMetadata: ['never', 'xmp'],
});

/** `shadow.mode`'s classical stand-ins: Photoroom's soft and hard AI shadows as a drop shadow, its floating one as `float`. */
const SHADOWS: Readonly<Record<string, Record<string, string>>> = Object.freeze({
  'ai.soft': { shadow: 'drop', shadow_softness: '0.8' },
  'ai.hard': { shadow: 'drop', shadow_softness: '0.1' },
  'ai.floating': { shadow: 'float' },
});

const refuse = (param: string, why: string) => new OptionError(param, `${param} ${why}`);

/** Photoroom's `top right bottom left` parameters (padding, paddingTop, ...) as one CSS shorthand; undefined when none is given. */
function sides(params: Map<string, string>, name: 'padding' | 'margin'): string | undefined {
  const one = ['Top', 'Right', 'Bottom', 'Left'].map((side) => params.get(`${name}${side}`));
  if (!params.has(name) && one.every((v) => v === undefined)) return undefined;
  const all = params.get(name) ?? '0';
  return one.map((v) => v ?? all).join(' ');
}

/** Photoroom's parameters as cutout's v1 parameters, each with the name to blame. */
function translate(params: Map<string, string>): [v1: string, value: string, sent: string][] {
  for (const name of params.keys()) {
    if (GENERATIVE.includes(name) || GENERATIVE.includes(`${name}=${params.get(name)}`)) throw refuse(name, 'is a generative option, which is not supported by this server (docs/photoroom.md)');
    const only = ONLY[name];
    if (only && !only.includes(params.get(name)!)) throw new OptionError(name, `${name}=${params.get(name)} is not supported by this server; it answers ${only.join(' or ')}`);
  }
  const out: [string, string, string][] = [];
  for (const [name, v1] of Object.entries(SAME_VALUE)) if (params.has(name)) out.push([v1, params.get(name)!, name]);
  const size = params.get('outputSize');
  if (size !== undefined && size !== 'auto') out.push(['canvas', size === 'originalImage' ? 'original' : size === 'croppedSubject' ? 'subject' : size, 'outputSize']);
  const align = [params.get('verticalAlignment'), params.get('horizontalAlignment')].filter((v) => v !== undefined);
  if (align.length) out.push(['align', align.join(' '), params.has('verticalAlignment') ? 'verticalAlignment' : 'horizontalAlignment']);
  for (const name of ['padding', 'margin'] as const) {
    const shorthand = sides(params, name);
    if (shorthand !== undefined) out.push([name, shorthand, name]);
  }
  const shadow = params.get('shadow.mode');
  if (shadow !== undefined) {
    if (!SHADOWS[shadow]) throw refuse('shadow.mode', `must be one of ${Object.keys(SHADOWS).join(', ')}, not ${JSON.stringify(shadow)}`);
    for (const [v1, value] of Object.entries(SHADOWS[shadow])) out.push([v1, value, 'shadow.mode']);
  }
  // `xmp` keeps the input's XMP (and its EXIF, upright: keep_metadata keeps both).
  if (params.get('preserveMetadata') === 'xmp') out.push(['keep_metadata', 'true', 'preserveMetadata']);
  const format = params.get('export.format');
  out.push(['format', format === undefined ? 'png' : format.toLowerCase() === 'jpeg' ? 'jpg' : format, 'export.format']);
  return out;
}

/** The request: every translated value parsed by its option row, under the name the client sent. */
export function parseEditParams(params: Map<string, string>): RemoveRequest {
  // The hosted APIs answer stills: an animation's first frame, as before issue 55 (docs/http-api.md, "Animations").
  const options: Record<string, unknown> = { ...API_DEFAULTS, size: 'full', animation: 'first' };
  for (const [v1, value, sent] of translate(params)) {
    const row = OPTION_TABLE.find((r) => r.api === v1)!;
    options[row.key] = row.parse(value, sent, 'api');
  }
  return options as unknown as ImageOptions;
}

/** The query (GET) or the multipart body (POST): its fields by name, and its two files. */
async function readEdit(req: IncomingMessage): Promise<{ params: Map<string, string>; image?: Buffer; background?: Buffer }> {
  const params = new Map<string, string>();
  if (req.method === 'GET') {
    for (const [k, v] of new URL(req.url ?? '/', 'http://x').searchParams) if (v.trim() !== '') params.set(k, v.trim());
    return { params };
  }
  if (mediaType(req) !== 'multipart/form-data') {
    req.resume();
    throw new OptionError('imageFile', 'Please provide an image: a multipart/form-data body with imageFile or imageUrl.', 'missing_image');
  }
  const { fields, files } = await readMultipart(req, { maxFiles: 2 });
  for (const [k, v] of Object.entries(fields)) if (v[0]?.trim()) params.set(k, v[0].trim());
  return { params, image: files.imageFile?.[0], background: files['background.imageFile']?.[0] };
}

/** `POST /v2/edit` and `GET /v2/edit`: one edited image, priced as one full-size removal. */
export async function handleEdit(ctx: EditContext, req: IncomingMessage, res: ServerResponse, caller: Caller): Promise<void> {
  const asked = await readEdit(req);
  const request = parseEditParams(asked.params);
  const imageUrl = asked.params.get('imageUrl');
  if (!asked.image?.length && !imageUrl) throw new OptionError('imageFile', 'Please provide an image: imageFile or imageUrl.', 'missing_image');
  if (asked.image?.length && imageUrl) throw refuse('imageUrl', 'cannot be given with imageFile: send one image');
  const fetching = { allowPrivateNetwork: ctx.config.allowPrivateNetwork, timeoutMs: LIMITS.fetchTimeoutMs };
  const { result } = await runSyncRemoval(ctx, res, {
    id: crypto.randomUUID(),
    caller,
    request: { ...request, quality: ctx.config.quality },
    testPreview: { maxArea: PHOTOROOM_SIZES.preview.maxArea },
    deadlineMs: dialectDeadlineMs(ctx.config),
    input: async (signal) => {
      const [image, background] = await Promise.all([
        asked.image?.length ? asked.image : fetchImageUrl(imageUrl!, { ...fetching, signal }),
        asked.background ?? (request.bgImage ? fetchImageUrl(request.bgImage, { ...fetching, label: 'background.imageUrl', signal }) : undefined),
      ]);
      return { image, background };
    },
    description: `photoroom edit ${asked.image ? 'upload' : 'url'}`,
  });
  sendBytes(res, 200, result.data, result.contentType, resultHeaders(resultFieldsOf(result), 'photoroom'));
}
