/**
 * A real S3 API for tests: s3rver (npm) in this process, on a free loopback port, over a temporary
 * folder, with one bucket. It checks no signatures (any SigV4 from its key S3RVER passes) and has
 * no lifecycle rules; with SDK v3 it needs path-style addressing and checksums only where the
 * API requires them, which `env` sets through the SDK's own variables.
 *
 *   const s3 = await testS3(t);      // stopped in t's teardown
 *   s3.env                           // AWS_* variables for a `cutout serve` child (or this process)
 *   await s3.stop(); await s3.start();   // an outage: nothing listens on the port meanwhile
 *   await s3.keys()                  // the objects' keys in the bucket
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { freePort } from './process.js';
import { runServices } from './run-services.js';

const require = createRequire(import.meta.url);

interface S3rverInstance {
  run(): Promise<unknown>;
  close(): Promise<void>;
}
type S3rverClass = new (options: Record<string, unknown>) => S3rverInstance;

export const TEST_BUCKET = 'cutout-results';

export interface TestS3 {
  port: number;
  endpoint: string;
  /** The variables a process needs to reach this store with the SDK's default chain. */
  env: Record<string, string>;
  /** s3rver's folder; objects are files under `<dir>/<bucket>/`. */
  dir: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Keys of the objects in the bucket (the probe object included), sorted. */
  keys(): Promise<string[]>;
}

/** Keys of the objects in the bucket of the s3rver over `dir`, sorted. */
async function keysIn(dir: string): Promise<string[]> {
  // s3rver keeps each object as `<key>._S3rver_object` (with metadata files beside it).
  const root = path.join(dir, TEST_BUCKET);
  const found: string[] = [];
  const walk = async (sub: string): Promise<void> => {
    for (const entry of await fs.readdir(path.join(root, sub), { withFileTypes: true }).catch(() => [])) {
      const rel = sub ? `${sub}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await walk(rel);
      else if (entry.name.endsWith('._S3rver_object')) found.push(rel.slice(0, -'._S3rver_object'.length));
    }
  };
  await walk('');
  return found.sort();
}

/**
 * The test run's shared s3rver (test/setup/services.ts), or null when the run has none. It serves
 * every test file of the run, so it cannot be stopped: the outage tests start their own
 * (`testS3`). Use a prefix of your own in the bucket.
 */
export function runS3(): TestS3 | null {
  const services = runServices();
  if (!services) return null;
  const { port, endpoint, dir, env } = services.s3;
  const shared = (what: string) => async () => {
    throw new Error(`${what}: the run's shared s3rver serves every test file; start one of this test's own with testS3(t)`);
  };
  return { port, endpoint, dir, env, stop: shared('stop'), start: shared('start'), keys: () => keysIn(dir) };
}

export async function testS3(t: Tap.Test): Promise<TestS3> {
  const S3rver = require('s3rver') as S3rverClass;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-s3-'));
  const port = await freePort();
  let server: S3rverInstance | null = null;
  const start = async () => {
    const next = new S3rver({ address: '127.0.0.1', port, silent: true, directory: dir, configureBuckets: [{ name: TEST_BUCKET }] });
    await next.run();
    server = next;
  };
  const stop = async () => {
    const running = server;
    server = null;
    await running?.close();
  };
  t.teardown(async () => {
    await stop().catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  });
  await start();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    port, endpoint, dir, start, stop,
    env: {
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_REQUEST_CHECKSUM_CALCULATION: 'WHEN_REQUIRED',
      AWS_RESPONSE_CHECKSUM_VALIDATION: 'WHEN_REQUIRED',
      AWS_EC2_METADATA_DISABLED: 'true',
      // No profile of the machine's user may take part.
      AWS_CONFIG_FILE: path.join(dir, 'no-aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: path.join(dir, 'no-aws-credentials'),
    },
    keys: () => keysIn(dir),
  };
}
