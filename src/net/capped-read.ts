/**
 * Reads a stream of bytes into one Buffer, refusing it as soon as it passes `maxBytes`: the
 * stream is then cancelled (a web stream) or destroyed (a Node stream), so an endless or
 * oversized source costs at most the cap. For the library's stream inputs; an AbortSignal stops
 * the read the same way.
 */
import { abortError } from '../errors.js';

export type ByteSource = AsyncIterable<Uint8Array | string>;

export async function readCapped(source: ByteSource, maxBytes: number, tooLarge: (received: number) => Error, signal?: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let received = 0;
  // Leaving the loop early (break, throw) calls the iterator's return(): the stream is released.
  for await (const chunk of source) {
    if (signal?.aborted) throw abortError(signal);
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    received += bytes.length;
    if (received > maxBytes) throw tooLarge(received);
    chunks.push(bytes);
  }
  return Buffer.concat(chunks, received);
}
