/**
 * `cutout serve`: the v1 HTTP API. Prints one line `listening on http://HOST:PORT` (the real port
 * for --port 0) and stops cleanly on SIGINT or SIGTERM: no new connections and no new jobs,
 * requests in flight finish, running jobs get a grace period (then go back to the queue), queued
 * jobs and pending callbacks stay in the store for the next start, then the store closes. A
 * second signal (SIGINT or SIGTERM) stops at once (the queue is durable: the next start carries on).
 * After the listening line, stdout carries the request log: one JSON line per request (the
 * listening line stays first and plain, for scripts that wait for it); other messages go to stderr.
 */
import type { Command } from 'commander';
import { loadConfig, type CutoutConfig } from '../config.js';
import { redactUrl } from '../store/url.js';
import { addSettingFlags, flagsGiven } from './setting-flags.js';
import { CutoutError } from '../errors.js';
import { watchParent } from './parent-watch.js';

/** Commander's values for serve's flags, by attribute name (`rateLimit`, `playground`, `data`). */
type ServeFlags = Record<string, unknown>;

// Every command registers its setting flags from the settings table (setting-flags.ts).
export { addSettingFlags, flagsGiven } from './setting-flags.js';

export function registerServe(program: Command): void {
  const serve = program.command('serve').description('run the v1 HTTP API');
  addSettingFlags(serve, 'serve')
    .addHelpText('after', SERVE_DEFAULTS_HELP)
    .action(runServe);
}

/** `cutout serve`: starts the server, says where it listens, and serves until a signal or the parent's exit. */
async function runServe(flags: ServeFlags, command: Command): Promise<void> {
  const config = await loadConfig(flagsGiven(command, flags));
  const { startServer } = await import('../server/app.js');
  let server;
  try {
    server = await startServer(config);
  } catch (err) {
    // A start-up failure in start-up words: there was no request to charge or to retry.
    const line = upstreamStartFailure(err, config.upstream);
    if (!line) throw err;
    process.stderr.write(`cutout serve: ${line}\n`);
    process.exitCode = 1;
    return;
  }
  // Said only when on (CUTOUT_HUGEPAGES=1, docs/internals.md "Huge pages"): the default adds no
  // line. Before the listening line, so whoever waits for that one has it.
  // Which state this server serves (a volume not mounted, a store URL not passed, a key made for
  // another data directory), the store's URL without its password; said once started, so that a
  // start-up failure stays the one line above.
  process.stderr.write(`cutout serve: data directory ${config.dataDir}; store ${describeStore(config)}\n`);
  const hugePages = (await import('../launcher/hugepages.js')).hugePagesStatus();
  if (hugePages.in_force) process.stderr.write(`cutout serve: the model's memory on huge pages (${hugePages.reason})\n`);
  process.stdout.write(`listening on ${server.url}\n`);
  if (server.metricsUrl) process.stderr.write(`cutout serve: metrics on ${server.metricsUrl}/metrics\n`);
  await untilStopped(server, config);
  // Everything is closed; if a stray handle still holds the loop, do not hang forever.
  setTimeout(() => process.exit(), 2000).unref();
}

/**
 * Serves until SIGINT, SIGTERM or (unless --no-exit-with-parent) the parent's exit, then closes
 * the server: requests and jobs in flight finish, queued jobs stay queued.
 */
function untilStopped(server: { close(): Promise<void> }, config: Readonly<CutoutConfig>): Promise<void> {
  return new Promise<void>((resolve) => {
    // A second signal, of either kind, ends the process at once, by that signal (the shell
    // reports 130 / 143). Not by process.exit(): its native teardown while an inference runs
    // in the worker thread aborts (exit 134). The queue is durable: the next start carries on.
    const stopNow = (signal: NodeJS.Signals) => {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    };
    let unwatchParent: () => void = () => undefined;
    const stop = (signal: NodeJS.Signals | 'parent process gone') => {
      unwatchParent();
      process.removeListener('SIGINT', stop);
      process.removeListener('SIGTERM', stop);
      process.once('SIGINT', stopNow);
      process.once('SIGTERM', stopNow);
      process.stderr.write(`cutout serve: ${signal}, finishing requests and running jobs in flight; queued jobs stay queued\n`);
      server.close().then(resolve, (err: unknown) => {
        process.stderr.write(`cutout serve: ${(err as Error).message}\n`);
        process.exitCode = 1;
        resolve();
      });
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    // Orphaned (the parent that started it is gone): the same clean stop as SIGTERM.
    if (config.exitWithParent) {
      unwatchParent = watchParent(() => {
        // Whoever read stderr may be gone with the parent: a failed write must not crash the stop.
        process.stderr.on('error', () => undefined);
        stop('parent process gone');
      });
    }
  });
}

/** The store as the start line names it: SQLite's file, or the PostgreSQL URL with its password hidden. */
function describeStore(config: Readonly<CutoutConfig>): string {
  return config.store ? `postgres ${redactUrl(config.store)}` : `sqlite ${config.dataDir}/cutout.db`;
}

/** The defaults a new user trips over: the API and the CLI answer different sizes (issue 29). */
const SERVE_DEFAULTS_HELP = `
Defaults of the API: POST /api/v1/remove and /api/v1/jobs answer size=preview (longest side at most
800 px, free) when size is not given, as the v1 specification fixes; ask size=full for native
resolution (1 credit). The CLI (cutout remove) defaults to --size full. The sync route says which
size it served in its X-Cutout-Size response header (preview or full).`;

/** A network failure's reason in a few words ("connection refused"). */
function networkWords(err: unknown): string {
  const e = err as Error & { code?: string; cause?: Error & { code?: string; errors?: (Error & { code?: string })[] } };
  if (e?.name === 'TimeoutError' || e?.cause?.name === 'TimeoutError') return 'timed out';
  const code = e?.cause?.code ?? e?.cause?.errors?.[0]?.code ?? e?.code;
  const words: Record<string, string> = {
    ECONNREFUSED: 'connection refused', ENOTFOUND: 'host not found', EAI_AGAIN: 'host name lookup failed',
    ECONNRESET: 'connection reset', EHOSTUNREACH: 'host unreachable', ENETUNREACH: 'network unreachable', ETIMEDOUT: 'timed out',
  };
  return (code && words[code]) ?? code ?? String(e?.cause?.message ?? e?.message ?? err).split('\n')[0];
}

/**
 * The one line for an upstream that cannot be used at start (gpu_unavailable: unreachable, or
 * answering 502-504), without the request words of that error ("nothing was charged. Retry
 * shortly."); null for any other failure, which keeps its own message.
 */
export function upstreamStartFailure(err: unknown, upstream: string | null): string | null {
  if (!upstream || !(err instanceof CutoutError) || err.code !== 'gpu_unavailable') return null;
  let shown = upstream;
  try {
    const url = new URL(upstream);
    url.username = '';
    url.password = '';
    shown = url.href.replace(/\/+$/, '');
  } catch {
    // shown as given
  }
  if (err.cause !== undefined) return `cannot reach the inference server at ${shown}: ${networkWords(err.cause)}`;
  const what = /\((.*)\)/.exec(err.message)?.[1] ?? err.message;
  return `the inference server at ${shown} is not ready: ${what}`;
}
