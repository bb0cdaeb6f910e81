/**
 * `npm run bench:results -- [--mb 10] [--repeat 5] [--count 1000] [--result-kb 512]`
 *
 * Where result bytes live, measured in one run: PostgreSQL (the results row, the default of a
 * fleet) against an S3 API (`--results s3://...`; s3rver in this process, over a local folder).
 * 1. The time to store a `--mb` MB result (incompressible bytes, like a PNG): recordRun, which
 *    writes the bytes and then commits the run, the charge and the row (`--repeat` times, median).
 * 2. The time to serve it: the results route's own streaming (sendStoredResult) behind a local
 *    HTTP server, fetched to the last byte; for S3 also the presigned URL (--results-redirect)
 *    fetched from the object store itself.
 * 3. PostgreSQL's growth per 1,000 results (`--count` results of `--result-kb` KB, each with its
 *    run and its charge): the database's size and the WAL written, and the bucket's folder.
 * 4. The same per 1,000 jobs waiting (`--jobs` uploaded jobs of `--input-kb` KB queued): with
 *    results in PostgreSQL their inputs are rows of `job_inputs`; with results in S3 they are
 *    objects beside them (issue 46; before it, they were rows there too, as in the first case).
 * Both on one embedded PostgreSQL with durable commits. Prints a table, then one JSON line.
 * s3rver is a test double (a Koa app writing files): its times say little about a real object
 * store's; PostgreSQL's growth is the figure that carries over.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { openStore, type Store } from '../dist/store/db.js';
import { sendStoredResult } from '../dist/server/v1/routes-results.js';
import { machine } from './common.js';
import { folderBytes, startPostgres } from './fleet-parts.js';
import { median, option } from './common.js';
import { BUCKET, queueJobs, startS3 } from './job-growth.js';

const args = process.argv.slice(2);
const megabytes = Number(option(args, '--mb', '10'));
const repeat = Number(option(args, '--repeat', '5'));
const count = Number(option(args, '--count', '1000'));
const resultKb = Number(option(args, '--result-kb', '512'));
const jobCount = Number(option(args, '--jobs', '200'));
const inputKb = Number(option(args, '--input-kb', '1024'));

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-results-'));

function run(accountId: string, data: Buffer) {
  return {
    id: crypto.randomUUID(), accountId, keyId: null, channel: 'api' as const, input: 'bench', size: 'full' as const, credits: 1 as const, ms: 1,
    result: { data, ext: 'png', contentType: 'image/png', width: 1, height: 1 },
  };
}

/** Serves stored results by id through the route's streaming, as `cutout serve` does. */
async function resultServer(store: Store): Promise<{ url: string; close(): void }> {
  const server = http.createServer((req, res) => {
    void (async () => {
      const row = await store.results.find(req.url!.slice(1), 3600);
      if (!row || !(await sendStoredResult(store, row, res))) res.writeHead(404).end();
    })().catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => { server.closeAllConnections(); server.close(); } };
}

/** Fetches `url` to its last byte; ms. */
async function timedFetch(url: string, expectBytes: number): Promise<number> {
  const started = performance.now();
  const res = await fetch(url);
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200 || body.length !== expectBytes) throw new Error(`${url}: ${res.status}, ${body.length} bytes`);
  return performance.now() - started;
}

interface PlacementResult {
  placement: 'postgres' | 's3';
  storeMs: number;
  serveMs: number;
  presignedMs: number | null;
  per1000: { dbBytes: number; walBytes: number; objectBytes: number };
  per1000Jobs: { dbBytes: number; walBytes: number; objectBytes: number };
}

async function measure(placement: 'postgres' | 's3', pg: Awaited<ReturnType<typeof startPostgres>>, s3Dir: string): Promise<PlacementResult> {
  const database = `bench_${placement}`;
  await pg.createDatabase(database);
  const store = await openStore(path.join(workDir, placement), {
    url: pg.urlFor(database), results: placement === 's3' ? `s3://${BUCKET}/${placement}` : null, resultsPathStyle: true,
  });
  const served = await resultServer(store);
  try {
    const { account } = await store.keys.create({});
    await store.ledger.addCredits(account, count + repeat + 10);
    const big = crypto.randomBytes(megabytes * 1024 * 1024);
    const storeMs: number[] = [];
    const serveMs: number[] = [];
    const presignedMs: number[] = [];
    for (let i = 0; i < repeat; i++) {
      const r = run(account, big);
      const started = performance.now();
      await store.ledger.recordRun(r);
      storeMs.push(performance.now() - started);
      serveMs.push(await timedFetch(`${served.url}/${r.id}`, big.length));
      const row = await store.results.find(r.id, 3600);
      const url = await store.results.presign(row!, 3600);
      if (url) presignedMs.push(await timedFetch(url, big.length));
    }

    const before = await pg.stats(database);
    const objectsBefore = fs.existsSync(s3Dir) ? folderBytes(s3Dir) : 0;
    const small = crypto.randomBytes(resultKb * 1024);
    // Eight at a time, as a few servers' workers would store them.
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next < count) {
        next++;
        // Distinct bytes per result (a store could deduplicate or compress repeats; PNGs do not repeat).
        const data = Buffer.from(small);
        data.writeUInt32BE(next, 0);
        await store.ledger.recordRun(run(account, data));
      }
    }));
    const after = await pg.stats(database);
    const objectsAfter = fs.existsSync(s3Dir) ? folderBytes(s3Dir) : 0;
    const scale = 1000 / count;
    const per1000Jobs = await queueJobs(store, account, pg, database, s3Dir, jobCount, inputKb);
    return {
      per1000Jobs,
      placement,
      storeMs: median(storeMs),
      serveMs: median(serveMs),
      presignedMs: presignedMs.length ? median(presignedMs) : null,
      per1000: {
        dbBytes: (after.dbBytes - before.dbBytes) * scale,
        walBytes: (after.walBytes - before.walBytes) * scale,
        objectBytes: (objectsAfter - objectsBefore) * scale,
      },
    };
  } finally {
    served.close();
    await store.close();
  }
}

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`;

const pg = await startPostgres();
const s3 = await startS3(path.join(workDir, 's3'));
try {
  const results: PlacementResult[] = [];
  for (const placement of ['postgres', 's3'] as const) results.push(await measure(placement, pg, s3.dir));
  console.log(`cutout bench:results, ${machine()}`);
  console.log(`${megabytes} MB result (median of ${repeat}); growth per 1,000 results of ${resultKb} KB (${count} stored)\n`);
  console.log('where        store   serve (route)   serve (presigned)   PostgreSQL size   WAL written   bucket');
  for (const r of results) {
    console.log(
      `${r.placement.padEnd(10)} ${`${Math.round(r.storeMs)} ms`.padStart(7)}   ${`${Math.round(r.serveMs)} ms`.padStart(13)}   ${(r.presignedMs === null ? '-' : `${Math.round(r.presignedMs)} ms`).padStart(17)}` +
      `   ${mb(r.per1000.dbBytes).padStart(15)}   ${mb(r.per1000.walBytes).padStart(11)}   ${mb(r.per1000.objectBytes).padStart(6)}`,
    );
  }
  console.log(`\ngrowth per 1,000 jobs waiting, uploads of ${inputKb} KB (${jobCount} queued)\n`);
  console.log('results in   PostgreSQL size   WAL written   bucket');
  for (const r of results) console.log(`${r.placement.padEnd(10)}   ${mb(r.per1000Jobs.dbBytes).padStart(15)}   ${mb(r.per1000Jobs.walBytes).padStart(11)}   ${mb(r.per1000Jobs.objectBytes).padStart(6)}`);
  console.log(JSON.stringify({ bench: 'results', machine: machine(), megabytes, repeat, count, resultKb, jobCount, inputKb, results }));
} finally {
  await s3.close().catch(() => undefined);
  await pg.stop();
  fs.rmSync(workDir, { recursive: true, force: true });
}
