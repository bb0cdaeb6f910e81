/** Starts the real `cutout serve` in a child process on a free port, with its own data directory. */
import type { ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openStore } from '../../src/store/db.js';
import { runCli } from './cli.js';
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
export async function jobInputsOf(srv: ServeProcess): Promise<string[]> {
  if (!srv.resultsPrefix) return fs.readdir(path.join(srv.dataDir, 'jobs')).catch(() => [] as string[]);
  const s3 = await sharedS3!;
  return (await s3.keys()).filter((k) => k.startsWith(`${srv.resultsPrefix}/inputs/`));
}

export interface CreatedKey { id: string; key: string; account: string; credits: number }

export async function createKey(dataDir: string, args: string[] = []): Promise<CreatedKey> {
  const r = await runCli(['keys', 'create', '--json', '--data', dataDir, ...args]);
  if (r.code !== 0) throw new Error(`keys create failed (${r.code}): ${r.stderr}`);
  return JSON.parse(r.stdout.toString()) as CreatedKey;
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
