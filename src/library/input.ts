/**
 * Every input kind the library takes, to the bytes (or pixels) the pipeline runs on. The format
 * is always found from the bytes (decode.ts), never from a name or a MIME type; the CLI's limits
 * apply before anything is read past them: a file's size is checked before it is read, a stream
 * is cut off at the limit.
 */
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { CutoutError, abortError, fsReason } from '../errors.js';
import { inputTooLargeMessage, LIMITS } from '../limits.js';
import { readCapped } from '../net/capped-read.js';
/** Decoded pixels: 8-bit, interleaved, 3 (RGB) or 4 (RGBA) channels, row after row. */
export interface RawImage {
  data: Uint8Array | Uint8ClampedArray;
  width: number;
  height: number;
  channels: 3 | 4;
}

/**
 * What `remove` takes: a file path, a `file:` URL, encoded image bytes (Buffer, Uint8Array,
 * ArrayBuffer, Blob), a Node Readable or a web ReadableStream of them, or raw pixels.
 */
export type ImageInput =
  | string
  | URL
  | Uint8Array
  | ArrayBuffer
  | Blob
  | NodeJS.ReadableStream
  | ReadableStream<Uint8Array>
  | RawImage;

function tooLarge(bytes: number): CutoutError {
  return new CutoutError('image_too_large', inputTooLargeMessage(bytes));
}

function checkSize(bytes: number): void {
  if (bytes > LIMITS.maxInputBytes) throw tooLarge(bytes);
}

async function readPath(file: string): Promise<Buffer> {
  let stat: fs.Stats;
  try {
    stat = await fs.promises.stat(file);
  } catch (err) {
    throw new CutoutError('invalid_request', `Cannot read ${file}: ${fsReason(err)}`);
  }
  if (!stat.isFile()) throw new CutoutError('invalid_request', `${file} is not a file`);
  checkSize(stat.size);
  try {
    return await fs.promises.readFile(file);
  } catch (err) {
    throw new CutoutError('invalid_request', `Cannot read ${file}: ${fsReason(err)}`);
  }
}

/** A URL input: `file:` only. cutout downloads nothing a caller did not fetch itself. */
function pathOfUrl(url: URL): string {
  if (url.protocol !== 'file:') {
    throw new CutoutError('invalid_request', `Input ${url.protocol}// URLs are not fetched: pass a file path, a file: URL, or the bytes (e.g. from fetch) instead`);
  }
  return fileURLToPath(url);
}

function isRawImage(input: object): input is RawImage {
  return 'data' in input && 'width' in input && 'height' in input && 'channels' in input;
}

function isWebStream(input: object): input is ReadableStream<Uint8Array> {
  return typeof (input as ReadableStream).getReader === 'function';
}

function isNodeStream(input: object): input is NodeJS.ReadableStream {
  return input instanceof Readable || (typeof (input as NodeJS.ReadableStream).pipe === 'function' && typeof (input as NodeJS.ReadableStream).on === 'function');
}

/** The bytes of an input (or its raw pixels, passed on as they are). Throws CutoutError or the signal's AbortError. */
export async function readImageInput(input: ImageInput, signal?: AbortSignal): Promise<Buffer | RawImage> {
  if (signal?.aborted) throw abortError(signal);
  if (typeof input === 'string') {
    if (/^file:/i.test(input)) return readPath(pathOfUrl(new URL(input)));
    if (/^[a-z][a-z0-9+.-]+:\/\//i.test(input)) pathOfUrl(new URL(input));
    return readPath(input);
  }
  if (input instanceof URL) return readPath(pathOfUrl(input));
  if (input instanceof Uint8Array) {
    checkSize(input.byteLength);
    return Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  }
  if (input instanceof ArrayBuffer) {
    checkSize(input.byteLength);
    return Buffer.from(input);
  }
  if (input instanceof Blob) {
    checkSize(input.size);
    return Buffer.from(await input.arrayBuffer());
  }
  if (input !== null && typeof input === 'object') {
    if (isRawImage(input)) return input;
    if (isWebStream(input) || isNodeStream(input)) {
      try {
        return await readCapped(input as AsyncIterable<Uint8Array>, LIMITS.maxInputBytes, tooLarge, signal);
      } catch (err) {
        if (err instanceof CutoutError || (err as Error)?.name === 'AbortError') throw err;
        throw new CutoutError('invalid_request', `Cannot read the input stream: ${(err as Error)?.message ?? String(err)}`, { cause: err });
      }
    }
  }
  throw new CutoutError(
    'invalid_request',
    'Expected a file path, a file: URL, a Buffer, Uint8Array, ArrayBuffer, Blob, a Node Readable or web ReadableStream, or raw pixels { data, width, height, channels }',
  );
}
