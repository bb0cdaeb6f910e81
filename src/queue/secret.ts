/**
 * The key that signs callbacks: CUTOUT_CALLBACK_SECRET (config.callbackSecret) when set,
 * otherwise a random secret generated once and kept in `<dataDir>/callback-secret` (mode 0600),
 * so signatures stay valid across restarts. `cutout` never prints it; an operator shares it with
 * a receiver by reading that file.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

export const CALLBACK_SECRET_FILE = 'callback-secret';

export async function loadCallbackSecret(dataDir: string, configured: string | null): Promise<string> {
  if (configured !== null && configured !== '') return configured;
  const file = path.join(dataDir, CALLBACK_SECRET_FILE);
  await fs.mkdir(dataDir, { recursive: true });
  try {
    // 'wx': of two processes starting at once, exactly one creates the file; the other reads it.
    const secret = crypto.randomBytes(32).toString('hex');
    await fs.writeFile(file, `${secret}\n`, { mode: 0o600, flag: 'wx' });
    return secret;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const stat = await fs.stat(file);
  if ((stat.mode & 0o077) !== 0) await fs.chmod(file, 0o600).catch(() => undefined);
  const secret = (await fs.readFile(file, 'utf8')).trim();
  if (secret === '') throw new Error(`${file} is empty; delete it to generate a new callback secret`);
  return secret;
}

/** `sha256=<hex HMAC-SHA256 of the raw body>`, the X-Service-Signature header value. */
export function signBody(body: string | Buffer, secret: string): string {
  return `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;
}
