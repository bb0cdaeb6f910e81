/** Starts the real `cutout model-server` in a child process, and finds free ports for restarts. */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { startListening } from './process.js';

export interface ModelServerProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
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

export async function startModelServer(t: Tap.Test, args: string[] = ['--port', '0']): Promise<ModelServerProcess> {
  // The model loads before the line is printed.
  return startListening(t, ['model-server', ...args], { timeoutMs: 60_000 });
}
