/**
 * Runs a hosted API's client sample as it is, under the preload that points its https hosts at a
 * test server (fixtures/redirect-https.cjs).
 */
import path from 'node:path';
import { spawn } from 'node:child_process';
import { FIXTURES, ROOT } from './cli.js';

const PRELOAD = path.join(FIXTURES, 'redirect-https.cjs');

/** `node --require redirect-https.cjs ...args` with `hosts` sent to `serverUrl`; its exit code and output. */
export function runRedirected(hosts: readonly string[], serverUrl: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', PRELOAD, ...args], {
      cwd: ROOT, env: { ...process.env, REDIRECT_HOSTS: hosts.join(','), REDIRECT_TO: serverUrl },
    });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
