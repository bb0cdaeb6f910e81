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
import { loadConfig, type ConfigInput } from '../config.js';
import { STORE_FLAG_HELP } from './keys.js';
import { CutoutError } from '../errors.js';
import { watchParent } from './parent-watch.js';

interface ServeFlags {
  host?: string;
  port?: string;
  baseUrl?: string;
  workers?: string;
  queueLimit?: string;
  syncTimeout?: string;
  rateLimit?: string;
  resultTtl?: string;
  callbackBackoff?: string;
  allowPrivateNetwork?: boolean;
  playground?: boolean;
  removebg?: boolean;
  metrics?: boolean;
  metricsPort?: string;
  metricsHost?: string;
  logLevel?: string;
  model?: string;
  data?: string;
  config?: string;
  store?: string;
  results?: string;
  resultsPathStyle?: boolean;
  resultsRedirect?: boolean;
  leaseMs?: string;
  upstream?: string;
  upstreamModel?: string;
  exitWithParent?: boolean;
  inferenceWorkers?: string;
  inferenceThreads?: string;
  upstreamToken?: string;
  precision?: string;
}

/** Flag name (commander's camelCase) -> config field. */
const FLAG_TO_CONFIG: Record<string, keyof ConfigInput> = {
  host: 'host', port: 'port', baseUrl: 'baseUrl', workers: 'workers', queueLimit: 'queueLimit',
  syncTimeout: 'syncTimeoutMs', rateLimit: 'rateLimit', resultTtl: 'resultTtlSeconds',
  callbackBackoff: 'callbackBackoffMs', allowPrivateNetwork: 'allowPrivateNetwork', playground: 'playground', removebg: 'removebg',
  metrics: 'metrics', metricsPort: 'metricsPort', metricsHost: 'metricsHost', logLevel: 'logLevel',
  model: 'model', data: 'dataDir', store: 'store', leaseMs: 'leaseMs',
  results: 'results', resultsPathStyle: 'resultsPathStyle', resultsRedirect: 'resultsRedirect', upstream: 'upstream', upstreamModel: 'upstreamModel',
  inferenceWorkers: 'inferenceWorkers', inferenceThreads: 'inferenceThreads',
  upstreamToken: 'upstreamToken', precision: 'precision',
};

/**
 * Only flags given on the command line go to loadConfig: commander fills `--no-playground` with a
 * default `true`, which must not override an environment variable or the config file.
 */
export function flagsGiven(command: Command, flags: Record<string, unknown>): ConfigInput {
  const out: ConfigInput = {};
  for (const [flag, field] of Object.entries(FLAG_TO_CONFIG)) {
    if (command.getOptionValueSource(flag) === 'cli' && flags[flag] !== undefined) out[field] = flags[flag];
  }
  return out;
}

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('run the v1 HTTP API')
    .option('--host <host>', 'bind address (env CUTOUT_HOST; default 127.0.0.1)')
    .option('--port <port>', 'port; 0 picks a free one (env CUTOUT_PORT; default 8080)')
    .option('--base-url <url>', 'the {base_url} of result URLs (env CUTOUT_BASE_URL; default http://HOST:PORT)')
    .option('--workers <n>', 'inference jobs run at once (default: from the CPU count)')
    .option('--inference-workers <n>', 'inference worker threads, each with its own session (default: 1 up to 8 cores, then one per 8 cores; docs/benchmarks.md)')
    .option('--inference-threads <n>', 'intra-op threads of each session (default: the cores over the workers; env CUTOUT_THREADS)')
    .option('--queue-limit <n>', 'jobs waiting before /jobs answers 503 gpu_unavailable (default 100)')
    .option('--sync-timeout <ms>', 'hard timeout of POST /api/v1/remove (default 30000)')
    .option('--rate-limit <n>', 'requests per minute per key (default 60)')
    .option('--result-ttl <seconds>', 'how long results can be downloaded (default 86400)')
    .option('--callback-backoff <ms>', 'first callback retry delay, doubling each retry (default 2000); callbacks are signed with $CUTOUT_CALLBACK_SECRET or a secret kept in the data directory')
    .option('--allow-private-network', 'let image_url and callback URLs reach loopback and private addresses (development and tests only)')
    .option('--no-playground', 'do not serve the web playground page at /')
    .option('--no-removebg', "do not answer remove.bg's API (POST /v1.0/removebg, GET /v1.0/account) nor rembg's (/api/remove)")
    .option('--no-metrics', 'do not serve Prometheus metrics at /metrics')
    .option('--metrics-port <port>', 'serve /metrics on a listener of its own on this port, not on the API port (recommended: a port only the scraper reaches, as Triton uses 8002); 0 picks a free one')
    .option('--metrics-host <host>', 'bind address of the --metrics-port listener (default: --host)')
    .option('--log-level <level>', 'lowest level of the JSON request log on stdout: trace, debug, info, warn, error, fatal or silent (env CUTOUT_LOG_LEVEL; default info)')
    .option('--model <name|file>', 'the model (env CUTOUT_MODEL; default: the default model)')
    .option('--upstream <url>', 'run the model on an Open Inference Protocol v2 server (Triton, KServe, cutout model-server) (env CUTOUT_UPSTREAM)')
    .option('--upstream-model <name>', "the model's name on the upstream (default: the local model's name)")
    .option('--upstream-token <token>', 'sent to the upstream as "Authorization: Bearer TOKEN" (a model server\'s --token) (env CUTOUT_UPSTREAM_TOKEN)')
    .option('--precision <precision>', 'auto | fp32 | int8: the default precision; with --upstream, int8 asks for the NAME-int8 models, auto and fp32 for NAME (env CUTOUT_PRECISION; default auto)')
    .option('--data <dir>', 'data directory (default: $CUTOUT_HOME or ~/.cutout)')
    .option('--config <file>', 'config file (default: found by cosmiconfig, module name "cutout")')
    .option('--store <url>', STORE_FLAG_HELP)
    .option('--results <url>', 'keep result images in an S3-compatible object store, s3://BUCKET[/PREFIX], configured by the AWS SDK\'s variables (AWS_REGION, AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL_S3, ...) (env CUTOUT_RESULTS; default: the data directory, or PostgreSQL with --store)')
    .option('--results-path-style', 'path-style addressing for the object store of --results (MinIO and most self-hosted stores)')
    .option('--results-redirect', 'GET /api/v1/results/{id} answers 302 to a presigned URL of the object store (valid until the result expires, at most 7 days) instead of streaming it')
    .option('--lease-ms <ms>', 'how long a claimed job stays with its server without a renewal; a dead server\'s jobs are taken over after it (default 30000)')
    .option('--no-exit-with-parent', 'keep serving when the process that started serve exits (nohup, a shell\'s &); by default serve then stops as on SIGTERM, so that npx cutout serve cannot leave it orphaned (run it under a process manager such as systemd)')
    .addHelpText('after', SERVE_DEFAULTS_HELP)
    .action(runServe);
}

/** `cutout serve`: starts the server, says where it listens, and serves until a signal or the parent's exit. */
async function runServe(flags: ServeFlags, command: Command): Promise<void> {
  const config = await loadConfig(flagsGiven(command, flags as Record<string, unknown>), { configFile: flags.config });
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
  const hugePages = (await import('../launcher/hugepages.js')).hugePagesStatus();
  if (hugePages.in_force) process.stderr.write(`cutout serve: the model's memory on huge pages (${hugePages.reason})\n`);
  process.stdout.write(`listening on ${server.url}\n`);
  if (server.metricsUrl) process.stderr.write(`cutout serve: metrics on ${server.metricsUrl}/metrics\n`);
  await untilStopped(server, flags);
  // Everything is closed; if a stray handle still holds the loop, do not hang forever.
  setTimeout(() => process.exit(), 2000).unref();
}

/**
 * Serves until SIGINT, SIGTERM or (unless --no-exit-with-parent) the parent's exit, then closes
 * the server: requests and jobs in flight finish, queued jobs stay queued.
 */
function untilStopped(server: { close(): Promise<void> }, flags: ServeFlags): Promise<void> {
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
    if (flags.exitWithParent !== false) {
      unwatchParent = watchParent(() => {
        // Whoever read stderr may be gone with the parent: a failed write must not crash the stop.
        process.stderr.on('error', () => undefined);
        stop('parent process gone');
      });
    }
  });
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
