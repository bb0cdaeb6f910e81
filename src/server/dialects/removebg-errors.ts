/**
 * remove.bg's error shape (docs/removebg.md): `{"errors": [{title, code, detail}]}` with its status
 * and code for each of cutout's error codes, its finer codes from the error's reason (errors.ts
 * ERROR_REASONS) or the parameter at fault, never from the message.
 */
import type { ServerResponse } from 'node:http';
import type { CutoutError, ErrorCode } from '../../errors.js';
import { OptionError } from '../../options.js';
import { sendJson } from '../http.js';
import { statusOf } from './dialect-kit.js';

/** remove.bg's status and code for each of cutout's error codes. */
const REMOVEBG_ERRORS: Readonly<Record<ErrorCode, { status: number; code: string; title: string }>> = Object.freeze({
  invalid_api_key: { status: 403, code: 'auth_failed', title: 'API Key invalid' },
  insufficient_credits: { status: 402, code: 'insufficient_credits', title: 'Insufficient credits' },
  rate_limited: { status: 429, code: 'rate_limit_exceeded', title: 'Rate limit exceeded' },
  invalid_request: { status: 400, code: 'invalid_parameters', title: 'Invalid parameters' },
  unsupported_format: { status: 400, code: 'failed_to_read_image', title: 'There was an error reading the image.' },
  image_too_large: { status: 400, code: 'file_too_large', title: 'File exceeds limit' },
  no_subject_detected: { status: 400, code: 'unknown_foreground', title: 'Could not identify foreground in image' },
  processing_failed: { status: 500, code: 'processing_failed', title: 'Processing failed' },
  gpu_unavailable: { status: 503, code: 'service_unavailable', title: 'Service unavailable' },
  not_found: { status: 404, code: 'not_found', title: 'Not found' },
});

/** Parameters whose bad value has its own code in remove.bg (`invalid_<name>`). */
const PARAM_CODES: Readonly<Record<string, string>> = Object.freeze({
  size: 'invalid_size', format: 'invalid_format', channels: 'invalid_channels', bg_color: 'invalid_bg_color',
  crop_margin: 'invalid_crop_margin', roi: 'invalid_roi', scale: 'invalid_scale', position: 'invalid_position',
  semitransparency: 'invalid_semitransparency', image_url: 'invalid_image_url', bg_image_url: 'invalid_bg_image_url',
});

/** remove.bg's `{status, code, title}` for a CutoutError; `detail` is cutout's message. */
export function removeBgError(err: CutoutError): { status: number; code: string; title: string } {
  const base = REMOVEBG_ERRORS[err.code] ?? REMOVEBG_ERRORS.processing_failed;
  // By the error's reason (errors.ts ERROR_REASONS), never its message.
  if (err.reason === 'resolution_too_high') return { ...base, code: 'resolution_too_high', title: 'Input image resolution too high' };
  if (err.reason === 'not_an_image') return { ...base, code: 'invalid_file_type', title: 'Invalid file type' };
  if (err.reason === 'missing_key') return { ...base, title: 'Missing API Key' };
  if (err instanceof OptionError) {
    const code = err.reason ?? PARAM_CODES[err.param];
    if (code) return { ...base, code, title: code.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase()) };
  }
  return { ...base, status: statusOf(err, base.status) };
}

/** Writes `err` in remove.bg's shape: its status, `errors[0]` with title, code and cutout's message. */
export function renderError(res: ServerResponse, err: CutoutError): void {
  const { status, code, title } = removeBgError(err);
  sendJson(res, status, { errors: [{ title, code, detail: err.message }] }, err.headers);
}
