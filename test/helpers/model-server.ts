/** Starts the real `cutout model-server` in a child process, and finds free ports for restarts. */
import type { ChildProcess } from 'node:child_process';
import { startListening } from './process.js';

export { freePort } from './process.js';

export interface ModelServerProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

export async function startModelServer(t: Tap.Test, args: string[] = ['--port', '0']): Promise<ModelServerProcess> {
  // The model loads before the line is printed.
  return startListening(t, ['model-server', ...args], { timeoutMs: 60_000 });
}
