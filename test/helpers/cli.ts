/** Runs the real `bin/cutout` in a child process. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BIN = fileURLToPath(new URL('../../bin/cutout', import.meta.url));
export const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));

export interface CliResult { code: number | null; stdout: Buffer; stderr: string }

export function runCli(args: string[], opts: { cwd?: string; env?: Record<string, string>; stdin?: Buffer } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: opts.cwd ?? ROOT, env: { ...process.env, ...opts.env } });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr: err }));
    if (opts.stdin) child.stdin.end(opts.stdin);
    else child.stdin.end();
  });
}

/** Alpha at a few points of an RGBA image: corners and centre. */
export async function alphaAt(image: Buffer | string, points: [number, number][]): Promise<number[]> {
  const { data, info } = await sharp(image).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return points.map(([x, y]) => data[(y * info.width + x) * info.channels + info.channels - 1]);
}
