/**
 * The store's tests run against both engines, so neither can drift: `forEachEngine` declares a
 * test once per engine, and `openTestStore` opens a fresh store of that engine (a temp SQLite
 * data directory, or a new database on this file's embedded PostgreSQL, started on first use).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import root from 'tap';
import { openStore, type Store, type StoreKind } from '../../src/store/db.js';
import { runPostgres, testPostgres, type TestPostgres } from './postgres.js';

export const ENGINES: readonly StoreKind[] = ['sqlite', 'postgres'];

let cluster: Promise<TestPostgres> | null = null;

/**
 * The test run's shared PostgreSQL (test/setup/services.ts), or else this test file's own
 * (stopped when the file's tests end). Either way `freshDatabase()` gives each test its own
 * database; a test that freezes or restarts the server needs `testPostgres(t)`.
 */
export function sharedPostgres(): Promise<TestPostgres> {
  cluster ??= Promise.resolve(runPostgres() ?? testPostgres(root));
  return cluster;
}

let ownCluster: Promise<TestPostgres> | null = null;

/** This test file's own PostgreSQL, never the run's: for the tests that freeze or restart it. */
export function filePostgres(): Promise<TestPostgres> {
  ownCluster ??= testPostgres(root);
  return ownCluster;
}

export async function tempDir(t: Tap.Test, prefix = 'cutout-store-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A URL for `--store` / openStore: a new database, or null for SQLite. */
export async function storeUrl(kind: StoreKind): Promise<string | null> {
  return kind === 'postgres' ? (await sharedPostgres()).freshDatabase() : null;
}

export interface TestStore { store: Store; dir: string; url: string | null }

/** A fresh store of `kind`, closed in t's teardown. */
export async function openTestStore(t: Tap.Test, kind: StoreKind, options: { now?: () => number } = {}): Promise<TestStore> {
  const dir = await tempDir(t);
  const url = await storeUrl(kind);
  const store = await openStore(dir, { url, now: options.now });
  t.teardown(() => store.close());
  return { store, dir, url };
}

/** Declares `fn` as one test per engine, named `[engine] name`. */
export function forEachEngine(name: string, fn: (t: Tap.Test, kind: StoreKind) => Promise<void>): void {
  for (const kind of ENGINES) root.test(`[${kind}] ${name}`, (t) => fn(t, kind));
}

let s3Prefixes = 0;

/**
 * A store of `kind` whose results go to a prefix of their own in the test bucket, its clock the
 * test's: the object-store tests of both lanes (results-s3-store, e2e/results-s3).
 */
export async function openS3Store(t: Tap.Test, kind: StoreKind, clock: { now: number }, bucket: string): Promise<{ store: Store; prefix: string; dir: string }> {
  const prefix = `unit-${process.pid}-${kind}-${++s3Prefixes}`;
  const dir = await tempDir(t);
  const store = await openStore(dir, { url: await storeUrl(kind), results: `s3://${bucket}/${prefix}`, resultsPathStyle: true, now: () => clock.now });
  t.teardown(() => store.close());
  return { store, prefix, dir };
}

/** The keys under `prefix` in the test bucket, the readiness probe left out. */
export async function objectsUnder(s3: { keys(): Promise<string[]> }, prefix: string): Promise<string[]> {
  return (await s3.keys()).filter((k) => k.startsWith(`${prefix}/`) && !k.endsWith('/.cutout-probe'));
}
