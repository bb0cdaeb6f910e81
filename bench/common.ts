/**
 * What the benchmarks share: where the package and its launcher are, their one way of reading a
 * `--name value` argument, the median, and running the CLI as a child process.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const BIN = path.join(ROOT, 'bin', 'cutout');
export const FIXTURES = path.join(ROOT, 'test', 'fixtures');

/** The value after `name` (`--runs 5`) in `args`, or the fallback when it is absent or empty. */
export function option(args: readonly string[], name: string, fallback: string): string;
export function option(args: readonly string[], name: string): string | undefined;
export function option(args: readonly string[], name: string, fallback?: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? args[i + 1] : fallback;
}

/** `--name value` from this process's command line, or the fallback. */
export function arg(name: string, fallback: string): string {
  return option(process.argv, `--${name}`, fallback);
}

/** The median (the mean of the middle two of an even count); NaN of nothing. */
export function median(xs: number[]): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Runs `cutout ...args` to its end; resolves with its stdout, rejects with its stderr. */
export function runCutout(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`cutout ${args[0]}: ${err}`))));
  });
}

/** The machine a figure was measured on: CPU model, cores, AVX-512 VNNI or not, memory, Node. */
export function machine(): string {
  const cpuinfo = fs.existsSync('/proc/cpuinfo') ? fs.readFileSync('/proc/cpuinfo', 'utf8') : '';
  const model = /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? 'unknown CPU';
  const vnni = /\bavx512_vnni\b/.test(cpuinfo) ? 'AVX-512 VNNI' : 'no AVX-512 VNNI';
  return `${model}, ${os.availableParallelism()} cores, ${vnni}, ${Math.round(os.totalmem() / 2 ** 30)} GB, Node ${process.version}`;
}
