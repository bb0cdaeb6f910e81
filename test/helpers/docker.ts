/**
 * The real Docker engine for the image tests (test/image/): the client, whether a daemon answers,
 * and the image built from the repository's own Dockerfile, as a user builds it.
 *
 * Without a daemon the tests skip and say how to get one; under CI=true they fail instead, so that
 * a CI machine without Docker cannot pass them by skipping. The client is $CUTOUT_DOCKER, else
 * /usr/bin/docker (Debian's docker.io, with BuildKit), else `docker` on PATH.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type Tap from 'tap';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export const DOCKER = process.env.CUTOUT_DOCKER ?? (fs.existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker');

const HOW_TO_INSTALL = 'install Docker (Debian: apt-get install docker.io; without systemd, scripts/dockerd.sh start) to run the image tests';

/** True when a Docker daemon answers. */
export function dockerAvailable(): boolean {
  const r = spawnSync(DOCKER, ['info', '--format', '{{.ServerVersion}}'], { encoding: 'utf8', timeout: 20_000 });
  return r.status === 0 && r.stdout.trim() !== '';
}

/**
 * Ends the test file here when no daemon answers: a skip with how to install one, or, under
 * CI=true, a failure. Returns whether the tests can go on.
 */
export function requireDocker(t: Tap.Test): boolean {
  if (dockerAvailable()) return true;
  if (process.env.CI === 'true') {
    t.fail(`no Docker daemon answers (${DOCKER} info) and CI=true: ${HOW_TO_INSTALL}`);
    return false;
  }
  t.plan(0, `no Docker daemon answers: ${HOW_TO_INSTALL}`);
  return false;
}

export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the docker client to the end (never through a shell). */
export function docker(args: string[], options: { timeoutMs?: number; input?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    // stdin only when there is input: a client that exits before reading it would fail the write (EPIPE).
    const child = spawn(DOCKER, args, { env: { ...process.env, DOCKER_BUILDKIT: '1' }, stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d));
    child.stderr!.on('data', (d: Buffer) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

/** Like `docker`, but throws with the client's words when it fails. */
export async function dockerOk(args: string[], options: { timeoutMs?: number } = {}): Promise<string> {
  const r = await docker(args, options);
  if (r.status !== 0) throw new Error(`docker ${args.join(' ')} exited ${r.status}: ${(r.stderr || r.stdout).trim().slice(-2000)}`);
  return r.stdout;
}

/**
 * The CA bundle handed to the build as the BuildKit secret `ca_bundle` (Dockerfile): that of a
 * TLS-intercepting proxy, as the system's trust store holds it here. $CUTOUT_CA_BUNDLE overrides;
 * none where the file is missing.
 */
function caBundle(): string | null {
  const file = process.env.CUTOUT_CA_BUNDLE ?? '/etc/ssl/certs/ca-certificates.crt';
  return fs.existsSync(file) ? file : null;
}

/**
 * `docker build` of the repository's Dockerfile, unchanged, with the host's network (this
 * machine's daemon runs without a bridge) and the CA bundle as a secret. Returns the seconds taken.
 */
export async function buildImage(tag: string, extraArgs: string[] = []): Promise<number> {
  const started = Date.now();
  const ca = caBundle();
  await dockerOk(['build', '--network', 'host', ...(ca ? ['--secret', `id=ca_bundle,src=${ca}`] : []), ...extraArgs, '-t', tag, ROOT], { timeoutMs: 40 * 60_000 });
  return (Date.now() - started) / 1000;
}

/** Removes a container, whatever its state (teardown). */
export async function removeContainer(name: string): Promise<void> {
  await docker(['rm', '-f', '-v', name]);
}
