/**
 * Writing `cutout remove`'s outputs safely. Each is written to a temporary file in the output's
 * folder, then renamed into place inside the charge's transaction (see remove.ts): a killed run
 * never leaves a half-written output, and an output that cannot be written is never charged.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { CutoutError } from '../errors.js';

/** Temporary files being written: removed when a signal stops the run at once, so it leaves none. */
const staged = new Set<string>();

/**
 * Removes the temporary files, then lets `signal` end the process (a shell reports 130 / 143):
 * the second Ctrl-C of a batch (batch.ts). SIGKILL cannot be caught; what it leaves is named
 * `.cutout-<pid>-<hex>.tmp`, never an output's own name.
 */
export function removeStagedAndDie(signal: NodeJS.Signals): void {
  for (const file of staged) fs.rmSync(file, { force: true });
  // Die of the signal itself, as if no handler were here. (process.exit() would run native
  // teardown while an inference runs in its worker thread, and that aborts.)
  process.removeAllListeners(signal);
  process.kill(process.pid, signal);
}

/**
 * Writes `data` beside `file` under a short hidden name (the output's own name plus a suffix
 * could pass the file system's 255-byte limit), and returns that name.
 */
export async function stageOutput(file: string, data: Buffer): Promise<string> {
  const dir = path.dirname(path.resolve(file));
  const tmp = path.join(dir, `.cutout-${process.pid}-${randomBytes(4).toString('hex')}.tmp`);
  staged.add(tmp);
  try {
    await fs.promises.mkdir(dir, { recursive: true });
    await fs.promises.writeFile(tmp, data);
    return tmp;
  } catch (err) {
    await discardStaged(tmp);
    throw new CutoutError('processing_failed', `Cannot write ${file}: ${(err as Error).message}`);
  }
}

/** Moves a staged file into place. */
export async function commitOutput(tmp: string, file: string): Promise<void> {
  try {
    await fs.promises.rename(tmp, file);
    staged.delete(tmp);
  } catch (err) {
    throw new CutoutError('processing_failed', `Cannot write ${file}: ${(err as Error).message}`);
  }
}

/** Removes a staged file that was not committed (a no-op after commitOutput). */
export async function discardStaged(tmp: string): Promise<void> {
  if (!staged.delete(tmp)) return;
  await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
}

/**
 * True when writing `output` would replace the input file itself (`--out photo.png` on
 * photo.png, or a link to it): refused even with --overwrite, which replaces outputs, not photos.
 */
export function isInputItself(output: string, input: string): boolean {
  if (input === '-') return false;
  try {
    return fs.realpathSync(output) === fs.realpathSync(input);
  } catch {
    return false; // the output does not exist yet
  }
}
