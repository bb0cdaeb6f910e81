/**
 * The API under test: `startServe` runs the real `cutout serve` in a child process (the e2e lane:
 * the real model, signals, the request log on stdout); `startApi` starts the same server in this
 * process from the same flags, with a stand-in behind the pipeline's model seam (the fast lane,
 * for tests whose subject is not the model). Keys are made in this process, on the store the
 * server uses (`cutout keys create` itself is tested in keys-cli.test.ts).
 */
import type { ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { loadConfig } from '../../src/config.js';
import { flagsGiven, registerServe } from '../../src/commands/serve.js';
import { startServer, type RunningServer, type ServerSeams } from '../../src/server/app.js';
import { openStore } from '../../src/store/db.js';
import { StandInInference } from './stand-in-model.js';
import { startListening } from './process.js';
import { testS3, TEST_BUCKET, type TestS3 } from './s3.js';
import tap from 'tap';

export interface ServeProcess {
  /** With CUTOUT_TEST_RESULTS=s3: the prefix of this server's objects in the shared bucket. */
  resultsPrefix?: string;
  url: string;
  dataDir: string;
  child: ChildProcess;
  stderr(): string;
  /** Sends `signal` and resolves with how the process ended and how long it took. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

export async function tempDataDir(t: Tap.Test): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-api-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  return dir;
}

let sharedS3: Promise<TestS3> | null = null;

/**
 * `CUTOUT_TEST_RESULTS=s3` (`npm run test:s3-results`): every server a test starts keeps its
 * results in one s3rver of this test process, under a prefix of its own, so the API tests of
 * results run unchanged against an object store. Off by default (the plain suite runs once).
 */
async function resultsInS3(args: string[]): Promise<{ args: string[]; env: Record<string, string> }> {
  if (process.env.CUTOUT_TEST_RESULTS !== 's3' || args.some((a) => a.startsWith('--results'))) return { args: [], env: {} };
  sharedS3 ??= testS3(tap);
  const s3 = await sharedS3;
  return { args: ['--results', `s3://${TEST_BUCKET}/${crypto.randomUUID()}`, '--results-path-style'], env: s3.env };
}

/**
 * Under `CUTOUT_TEST_RESULTS=s3`, what a server stored must all be objects: no result file in its
 * data directory, no result bytes in its database (SQLite there, or the PostgreSQL of `--store`).
 * Thrown from a teardown, which fails the test that started the server.
 */
async function assertNoResultBytesOutsideS3(dataDir: string, args: string[]): Promise<void> {
  const files = (await fs.readdir(path.join(dataDir, 'results')).catch(() => [] as string[])).filter((f) => !f.startsWith('.'));
  if (files.length) throw new Error(`results in s3, yet ${files.length} result file(s) in ${dataDir}/results: ${files.slice(0, 3).join(', ')}`);
  const storeAt = args.indexOf('--store');
  const store = await openStore(dataDir, { url: storeAt >= 0 ? args[storeAt + 1] : null });
  try {
    // PostgreSQL rows can hold the bytes (column data); SQLite's rows only a location, which for a
    // file is its absolute path.
    const row = await store.db.get<{ n: number | string }>(storeAt >= 0
      ? 'SELECT COUNT(*) AS n FROM results WHERE data IS NOT NULL'
      : "SELECT COUNT(*) AS n FROM results WHERE path LIKE '/%'");
    if (Number(row?.n) !== 0) throw new Error(`results in s3, yet ${row?.n} result row(s) keep their bytes outside it`);
  } finally {
    await store.close();
  }
}

export async function startServe(t: Tap.Test, args: string[] = [], opts: { env?: Record<string, string>; dataDir?: string } = {}): Promise<ServeProcess> {
  const dataDir = opts.dataDir ?? (await tempDataDir(t));
  const s3 = await resultsInS3(args);
  const serving = await startListening(t, ['serve', '--port', '0', '--data', dataDir, ...args, ...s3.args], {
    env: { ...process.env, CUTOUT_MARKETPLACE_SECRET: '', ...s3.env, ...opts.env },
  });
  // Teardowns run last first: this one before the server stops and its data directory goes.
  if (s3.args.length) t.teardown(() => assertNoResultBytesOutsideS3(dataDir, args));
  return { ...serving, dataDir, resultsPrefix: s3.args.length ? s3.args[1].replace(`s3://${TEST_BUCKET}/`, '') : undefined };
}

/**
 * The stored inputs of a server's waiting jobs, wherever they live: files in its data directory,
 * or with results in an object store, objects beside them (`<prefix>/inputs/`).
 */
export async function jobInputsOf(srv: { dataDir: string; resultsPrefix?: string }): Promise<string[]> {
  if (!srv.resultsPrefix) return fs.readdir(path.join(srv.dataDir, 'jobs')).catch(() => [] as string[]);
  const s3 = await sharedS3!;
  return (await s3.keys()).filter((k) => k.startsWith(`${srv.resultsPrefix}/inputs/`));
}

export interface ApiServer {
  url: string;
  dataDir: string;
  /** The server in this process (null under `npm run test:s3-results`, which runs `cutout serve`). */
  server: RunningServer | null;
  /** The stand-in model of this server (null with `realModel`, or under test:s3-results). */
  model: StandInInference | null;
  /** An in-process server has no stderr of its own: a test that reads it belongs in the e2e lane. */
  stderr(): string;
  /** Closes the server as SIGTERM would (requests and running jobs finish); how long that took. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

/** `cutout serve ARGS` parsed by the command's own definition: the config it would run with. */
async function serveConfig(args: string[], env: Record<string, string | undefined>) {
  const program = new Command().exitOverride();
  registerServe(program);
  const serve = program.commands.find((c) => c.name() === 'serve')!;
  let parsed: { flags: Record<string, unknown>; command: Command } | null = null;
  serve.exitOverride().action((flags: Record<string, unknown>, command: Command) => { parsed = { flags, command }; });
  await program.parseAsync(['serve', ...args], { from: 'user' });
  const { flags, command } = parsed!;
  return loadConfig(flagsGiven(command, flags), { configFile: flags.config as string | undefined, env });
}

/**
 * Starts the server in this process, on a free port with its own data directory, from the flags
 * `cutout serve` takes; closed in t's teardown. The model is the stand-in (each call taking
 * `modelMs`, default about none) unless `realModel`. `apis`: the APIs to mount in place of the
 * server's own (ServerSeams.apis), in process only.
 * The request log is silent unless `--log-level` is given (it would go to the TAP stream).
 */
export async function startApi(
  t: Tap.Test, args: string[] = [],
  opts: { env?: Record<string, string>; dataDir?: string; realModel?: boolean; modelMs?: number; apis?: ServerSeams['apis'] } = {},
): Promise<ApiServer> {
  // `npm run test:s3-results` runs these tests again against an object store, through child
  // processes whose AWS_* variables point at s3rver (this process's SDK would read its own).
  if (process.env.CUTOUT_TEST_RESULTS === 's3') {
    if (opts.apis) throw new Error('startApi: apis of a test cannot reach a `cutout serve` child process');
    return { ...(await startServe(t, args, opts)), server: null, model: null };
  }
  const dataDir = opts.dataDir ?? (await tempDataDir(t));
  const logLevel = args.includes('--log-level') ? [] : ['--log-level', 'silent'];
  const config = await serveConfig(['--port', '0', '--data', dataDir, ...logLevel, ...args], {
    ...process.env, CUTOUT_MARKETPLACE_SECRET: '', ...opts.env,
  });
  const model = opts.realModel ? null : new StandInInference({ ms: opts.modelMs });
  const server = await startServer(config, { inference: model ?? undefined, apis: opts.apis });
  const stop = async () => {
    const started = Date.now();
    await server.close();
    return { code: 0, signal: null, ms: Date.now() - started };
  };
  t.teardown(stop);
  return {
    url: server.url, dataDir, server, model, stop,
    stderr(): never {
      throw new Error('an in-process server has no stderr of its own: run this test with startServe (e2e lane)');
    },
  };
}

export interface CreatedKey { id: string; key: string; account: string; credits: number }

/**
 * `cutout keys create --json --data DIR ARGS`, done in this process on the same store (a child
 * process per key cost about half a second each). Takes the command's flags: --store, --account,
 * --name, --test.
 */
export async function createKey(dataDir: string, args: string[] = []): Promise<CreatedKey> {
  const flag = (name: string) => {
    const at = args.indexOf(name);
    return at >= 0 ? args[at + 1] : undefined;
  };
  const known = new Set(['--store', '--account', '--name', '--test']);
  for (const a of args) if (a.startsWith('--') && !known.has(a)) throw new Error(`createKey: flag ${a} is not handled in process`);
  const store = await openStore(dataDir, { url: flag('--store') ?? null });
  try {
    const created = await store.keys.create({ name: flag('--name') ?? null, test: args.includes('--test'), accountId: flag('--account') ?? null });
    return JSON.parse(JSON.stringify(created)) as CreatedKey;
  } finally {
    await store.close();
  }
}

export function bearer(key: string, extra: Record<string, string> = {}): Record<string, string> {
  return { Authorization: `Bearer ${key}`, ...extra };
}

/** The error body of part 7, checked for shape; returns the code. */
export async function errorCode(res: Response): Promise<{ status: number; code: string; message: string; body: any }> {
  const body = (await res.json()) as any;
  return { status: res.status, code: body?.error?.code, message: body?.error?.message, body };
}

/** A multipart body with the image as `image_file` and the given fields. */
export function upload(image: Buffer, fields: Record<string, string> = {}): FormData {
  const f = new FormData();
  f.append('image_file', new Blob([image]), 'photo.jpg');
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  return f;
}

/** The key's balance, from GET /api/v1/account. */
export async function balanceOf(url: string, key: string): Promise<number> {
  return ((await (await fetch(`${url}/api/v1/account`, { headers: bearer(key) })).json()) as any).balance;
}
