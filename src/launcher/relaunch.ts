/**
 * The launcher's relaunch (bin/cutout): when huge pages are wanted and glibc's tunable is not set
 * yet, node starts again with it, since glibc reads GLIBC_TUNABLES only at a process's start
 * (hugepages.ts). With `process.execve` (Node 22.15 and later) the process replaces itself: same
 * pid, nothing stays behind. On older Node the launcher spawns the real process, waits for it,
 * passes signals on and exits as it did.
 */
import { spawn } from 'node:child_process';
import { decideHugePages, processFacts } from './hugepages.js';

/** Signals passed on to the relaunched process (SIGINT below: a terminal sends it to both). */
const FORWARDED: NodeJS.Signals[] = ['SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR2'];

/**
 * Relaunches `script` (bin/cutout) with huge pages when they are wanted and not yet set; returns
 * true if it did (the caller must then run nothing else), false to run cutout in this process.
 */
export function relaunchForHugePages(script: string): boolean {
  const decision = decideHugePages(processFacts());
  if (!decision.relaunch) return false;
  const env = { ...process.env, GLIBC_TUNABLES: decision.tunables };
  const argv = [...process.execArgv, script, ...process.argv.slice(2)];
  const execve = (process as unknown as { execve?: (file: string, args: string[], env: NodeJS.ProcessEnv) => never }).execve;
  if (typeof execve === 'function') {
    try {
      execve.call(process, process.execPath, [process.execPath, ...argv], env);
    } catch {
      return false; // exec refused (a permission model, a sandbox): run without huge pages
    }
  }
  const child = spawn(process.execPath, argv, { stdio: 'inherit', env });
  const pass = (signal: NodeJS.Signals) => () => {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  };
  const handlers = FORWARDED.map((s) => [s, pass(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  // Ctrl-C in a terminal reaches both processes (one process group): passing it on too would be
  // a second SIGINT, which `cutout serve` takes as "stop at once". Without a terminal a SIGINT
  // was sent to this pid alone (a test, a supervisor), and is passed on.
  const interactive = Boolean(process.stdin.isTTY || process.stdout.isTTY || process.stderr.isTTY);
  const onInt = interactive ? () => undefined : pass('SIGINT');
  process.on('SIGINT', onInt);
  child.on('error', (err) => {
    process.stderr.write(`cutout: cannot start node again with huge pages: ${err.message}\n`);
    process.exitCode = 1;
  });
  child.on('exit', (code, signal) => {
    for (const [s, h] of handlers) process.removeListener(s, h);
    process.removeListener('SIGINT', onInt);
    if (signal) {
      // Die of the same signal, so the caller sees what the real process saw.
      process.kill(process.pid, signal);
      setTimeout(() => process.exit(1), 1000).unref();
      return;
    }
    process.exitCode = code ?? 1;
  });
  return true;
}
