/**
 * A background picture named by a local caller (`--bg-image`, the library's `bgImage`): a file,
 * or an http(s) URL fetched under image_url's rules (size, redirects, timeout). A local run may
 * reach the private network: the SSRF guard protects a server from its callers, and here the
 * caller is the machine's user. Servers never read a path: their doors fetch URLs only.
 */
import fs from 'node:fs/promises';
import { CutoutError, fsReason } from './errors.js';
import { LIMITS } from './limits.js';

export async function readBgImage(where: string, name = 'bgImage'): Promise<Buffer> {
  if (/^https?:\/\//i.test(where)) {
    // Loaded when a URL is given: a local run names a file far more often, and the fetcher and its
    // address checks cost every `cutout` call about as much as the rest of the flags (issue 33's bench).
    const { fetchImageUrl } = await import('./net/fetch-url.js');
    try {
      return await fetchImageUrl(where, { allowPrivateNetwork: true });
    } catch (err) {
      throw err instanceof CutoutError ? new CutoutError(err.code, `${name}: ${err.message.replace(/^image_url /, '')}`) : err;
    }
  }
  let size: number;
  try {
    size = (await fs.stat(where)).size;
  } catch (err) {
    throw new CutoutError('invalid_request', `${name} ${where}: ${fsReason(err)}`);
  }
  if (size > LIMITS.maxInputBytes) throw new CutoutError('image_too_large', `${name} ${where} is over the input limit`);
  return fs.readFile(where);
}
