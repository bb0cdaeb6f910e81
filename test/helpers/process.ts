/** A real cutout child process that prints `listening on URL` once it serves, and polling helpers. */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import net from 'node:net';
import { BIN, ROOT } from './cli.js';

export interface ListeningProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  /** Sends `signal` (unless it already ended) and resolves with how the process ended and how long that took. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

/**
 * Spawns `cutout ARGS` and resolves once it prints `listening on URL` on stdout; rejects when it
 * exits first or stays silent for `timeoutMs`, with its stderr in the message. Killed in teardown.
 */
export async function startListening(t: Tap.Test, args: string[], options: { env?: SpawnOptions['env']; timeoutMs?: number } = {}): Promise<ListeningProcess> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: options.env ?? { ...process.env } });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    const started = Date.now();
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    const end = await exited;
    return { ...end, ms: Date.now() - started };
  };
  t.teardown(async () => { await stop('SIGKILL'); });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`cutout ${args[0]}: no listening line within ${timeoutMs / 1000} s; stderr: ${err}`)), timeoutMs);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^listening on (http:\/\/\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then(({ code }) => { clearTimeout(timer); reject(new Error(`cutout ${args[0]} exited with ${code} before listening; stderr: ${err}`)); });
  });
  return { url, child, stderr: () => err, stop };
}

/** Polls `probe` every 50 ms until it gives a truthy value; throws after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 90_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A port free right now (bound on 0, then released), for a server that must come back on it. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
