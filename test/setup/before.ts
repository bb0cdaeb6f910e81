/**
 * tap's `before` script (package.json "tap"), run once before any test file of a run:
 * 1. builds dist/ when it is older than src/ (build.ts), so that no child process runs a stale CLI;
 * 2. starts the services the run shares (one PostgreSQL, one s3rver) in a daemon of their own,
 *    and returns once it says where they are (helpers/run-services.ts). The daemon ends with the
 *    tap runner: after.ts stops it, and it stops by itself if the runner is gone (Ctrl-C).
 */
import { spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildIfStale } from './build.js';
import { runServicesFile } from '../helpers/run-services.js';

buildIfStale();

const runner = process.ppid;
const file = runServicesFile(runner);
const log = path.join(os.tmpdir(), `cutout-test-run-${runner}.log`);
const daemon = spawn(process.execPath, [...process.execArgv, fileURLToPath(new URL('./services.ts', import.meta.url)), String(runner)], {
  detached: true,
  stdio: ['ignore', openSync(log, 'a'), openSync(log, 'a')],
});
daemon.unref();
const exited = new Promise<number | null>((resolve) => daemon.once('exit', resolve));
const deadline = Date.now() + 60_000;
for (;;) {
  if (existsSync(file)) break;
  const code = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 100))]);
  if (code !== undefined) throw new Error(`the test services exited (${code}) before starting: ${readFileSync(log, 'utf8')}`);
  if (Date.now() > deadline) {
    daemon.kill();
    throw new Error(`the test services did not start within 60 s: ${readFileSync(log, 'utf8')}`);
  }
}
process.exit(0);
