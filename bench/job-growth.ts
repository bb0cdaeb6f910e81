/**
 * PostgreSQL's growth per 1,000 waiting jobs (issue 46), shared by `bench:results` and
 * `bench:fleet`: `jobCount` uploaded jobs of `inputKb` KB (distinct bytes) queued on a store,
 * the database's growth and the WAL written, and the bucket's folder, scaled to 1,000 jobs.
 * "Before" is a store whose results (and so job inputs) are in PostgreSQL, as every fleet had its
 * inputs before issue 46 (rows of `job_inputs`); "after" is a store with `--results s3://...`,
 * whose inputs are objects beside the results. s3rver stands in for the object store, in this
 * process (a dev dependency: the benches run in a clone, like the tests).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { openStore, type NewJob, type Store } from '../dist/store/db.js';
import { folderBytes, freePort, type Postgres } from './fleet-parts.js';

export const BUCKET = 'cutout-bench';

export interface Growth { dbBytes: number; walBytes: number; objectBytes: number }

/**
 * s3rver on a free port over `dir`, with the AWS SDK's environment pointed at it; `close()` stops
 * it and puts the environment back, so that what the bench runs next does not aim at it.
 */
export async function startS3(dir: string): Promise<{ endpoint: string; dir: string; close(): Promise<void> }> {
  const S3rver = createRequire(import.meta.url)('s3rver') as new (o: Record<string, unknown>) => { run(): Promise<unknown>; close(): Promise<void> };
  const port = await freePort();
  const server = new S3rver({ address: '127.0.0.1', port, silent: true, directory: dir, configureBuckets: [{ name: BUCKET }] });
  await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL_S3: endpoint,
    AWS_REQUEST_CHECKSUM_CALCULATION: 'WHEN_REQUIRED', AWS_RESPONSE_CHECKSUM_VALIDATION: 'WHEN_REQUIRED', AWS_EC2_METADATA_DISABLED: 'true',
  };
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  return {
    endpoint, dir,
    async close() {
      await server.close();
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    },
  };
}

/** Queues `jobCount` uploaded jobs of `inputKb` KB on `store` and answers the growth per 1,000. */
export async function queueJobs(store: Store, accountId: string, pg: Postgres, database: string, s3Dir: string, jobCount: number, inputKb: number): Promise<Growth> {
  const before = await pg.stats(database);
  const objectsBefore = fs.existsSync(s3Dir) ? folderBytes(s3Dir) : 0;
  const input = crypto.randomBytes(inputKb * 1024);
  for (let i = 0; i < jobCount; i++) {
    const data = Buffer.from(input);
    data.writeUInt32BE(i, 0); // distinct bytes: a store could deduplicate or compress repeats
    await store.jobs.create([{
      id: crypto.randomUUID(), accountId, keyId: null, options: { size: 'preview' } as NewJob['options'], sourceKind: 'image_file', sourceUrl: null,
      input: data, inputDesc: 'bench', callbackUrl: null, billable: true, batchId: null,
    }], jobCount + 1);
  }
  const after = await pg.stats(database);
  const objectsAfter = fs.existsSync(s3Dir) ? folderBytes(s3Dir) : 0;
  const scale = 1000 / jobCount;
  return { dbBytes: (after.dbBytes - before.dbBytes) * scale, walBytes: (after.walBytes - before.walBytes) * scale, objectBytes: (objectsAfter - objectsBefore) * scale };
}

/** Before (inputs in PostgreSQL) and after (inputs beside S3 results), each on a database of its own. */
export async function measureJobGrowth(pg: Postgres, workDir: string, jobCount: number, inputKb: number): Promise<{ postgres: Growth; s3: Growth }> {
  const s3 = await startS3(path.join(workDir, 'job-growth-s3'));
  try {
    const out: Partial<Record<'postgres' | 's3', Growth>> = {};
    for (const placement of ['postgres', 's3'] as const) {
      const database = `bench_jobs_${placement}`;
      await pg.createDatabase(database);
      const store = await openStore(path.join(workDir, `job-growth-${placement}`), {
        url: pg.urlFor(database), results: placement === 's3' ? `s3://${BUCKET}/jobs` : null, resultsPathStyle: true,
      });
      try {
        const { account } = await store.keys.create({});
        out[placement] = await queueJobs(store, account, pg, database, s3.dir, jobCount, inputKb);
      } finally {
        await store.close();
      }
    }
    return out as { postgres: Growth; s3: Growth };
  } finally {
    await s3.close().catch(() => undefined);
  }
}

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`;

/** The table's lines. */
export function formatJobGrowth(g: { postgres: Growth; s3: Growth }, jobCount: number, inputKb: number): string[] {
  return [
    `growth per 1,000 jobs waiting, uploads of ${inputKb} KB (${jobCount} queued)`,
    'inputs in                                PostgreSQL size   WAL written   bucket',
    ...([['before: PostgreSQL (job_inputs rows)', g.postgres], ['after: beside S3 results (objects)', g.s3]] as const).map(
      ([name, r]) => `${name.padEnd(40)} ${mb(r.dbBytes).padStart(15)}   ${mb(r.walBytes).padStart(11)}   ${mb(r.objectBytes).padStart(6)}`,
    ),
  ];
}
