/**
 * The services one test run shares (test/setup/before.ts starts them, after.ts stops them): one
 * PostgreSQL cluster and one s3rver for every test file of the run, instead of one of each per
 * file. The before script and the test files are all children of the same tap runner, so the
 * runner's pid names the file that says where the services are. A file run without that runner
 * (plain node) finds none, and its helpers start services of their own, as before.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface RunServices {
  /** The daemon process that holds the services. */
  pid: number;
  postgres: { port: number; user: string; password: string };
  s3: { port: number; endpoint: string; dir: string; env: Record<string, string> };
}

/** Where the services of the run whose runner is `runnerPid` are described. */
export function runServicesFile(runnerPid: number): string {
  return path.join(os.tmpdir(), `cutout-test-run-${runnerPid}.json`);
}

/** The services of this process's test run, or null (no before script ran, or it started none). */
export function runServices(): RunServices | null {
  try {
    return JSON.parse(readFileSync(runServicesFile(process.ppid), 'utf8')) as RunServices;
  } catch {
    return null;
  }
}
