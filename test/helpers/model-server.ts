/** Starts the real `cutout model-server` in a child process, and finds free ports for restarts. */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { BIN, ROOT } from './cli.js';

export interface ModelServerProcess {
  url: string;
  child: ChildProcess;
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
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
  const child = spawn(process.execPath, [BIN, 'model-server', ...args], { cwd: ROOT, env: { ...process.env } });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    // The model loads before the line is printed.
    const timer = setTimeout(() => reject(new Error(`no listening line within 60 s; stderr: ${err}`)), 60_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^listening on (http:\/\/\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then(({ code }) => reject(new Error(`model-server exited with ${code} before listening; stderr: ${err}`)));
  });
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  t.teardown(async () => { await stop('SIGKILL'); });
  return { url, child, stderr: () => err, stop };
}
