/**
 * The settings table: one row per setting, read by the config loader (config.ts: defaults,
 * parsers, environment variables, `_FILE` secrets), by commander (`serve` and `model-server`
 * register their flags from it), by the docs (docs/deploy.md's table is checked against it) and by
 * the completions (checked against it). A new setting is one row here.
 *
 * Environment names follow cli-contract.md "Settings from the environment": `CUTOUT_` + the flag's
 * name in upper snake case, the names the contract already lists keeping theirs; a negated flag
 * (`--no-playground`) is named by its setting (`CUTOUT_PLAYGROUND=false`), as commander names the
 * option, so that no variable says "no" to be set to false. A row marked `secret` is also read
 * from the file named by `<ENV>_FILE` (Docker and Kubernetes secrets), and its value is never
 * repeated in a message.
 */
import os from 'node:os';
import path from 'node:path';
import { CutoutError } from './errors.js';
import { LIMITS } from './limits.js';
import { parseEnum, PRECISIONS, QUALITIES } from './options.js';
import { inferenceSplit } from './pipeline/inference-split.js';
import { redactUrl } from './store/url.js';
import { usableCores, usableMemory } from './container-limits.js';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The commands whose flags come from this table. */
export type ServerCommand = 'serve' | 'model-server';

export interface SettingRow {
  /** The field of CutoutConfig (and the config file's key). */
  key: string;
  /** The commander flag, as given to `.option()`, in each command that has it. */
  flags: Partial<Record<ServerCommand, string>>;
  /** The environment variable; null: none (a CLI-only setting). */
  env: string | null;
  /** Checks and converts a value from any source (flag, environment, file, default). */
  parse: (v: unknown) => unknown;
  default: unknown;
  /** The default in words for --help and the docs where it is computed (from the CPU count, ...). */
  defaultText?: string;
  help: string;
  /** Read also from `<env>_FILE`; never shown in a message. */
  secret?: boolean;
  /** Not a key of the config file (the file's own path). */
  notInFile?: boolean;
}

function fail(field: string, what: string, got: unknown): never {
  throw new CutoutError('invalid_request', `Expected ${what} for ${field} but received ${JSON.stringify(got)}`);
}

export function int(field: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) fail(field, `an integer from ${min} to ${max}`, v);
  return n;
}

export function bool(field: string, v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  return fail(field, 'true or false', v);
}

export function str(field: string, v: unknown): string {
  if (typeof v !== 'string' || v.trim() === '') fail(field, 'a non-empty string', v);
  return v;
}

function nullableStr(field: string, v: unknown): string | null {
  return v === null ? null : str(field, v);
}

function httpUrl(field: string, v: unknown): string | null {
  const s = nullableStr(field, v);
  if (s !== null && !/^https?:\/\/[^/]/i.test(s)) fail(field, 'an http(s) URL', v);
  return s === null ? null : s.replace(/\/+$/, '');
}

/** A bearer token: printable ASCII without spaces (it travels in an HTTP header), or null. */
function token(field: string, v: unknown): string | null {
  if (v === null) return null;
  if (typeof v !== 'string' || !/^[\x21-\x7e]{1,4096}$/.test(v)) {
    throw new CutoutError('invalid_request', `Expected a token of printable ASCII characters without spaces for ${field}`);
  }
  return v;
}

export function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? path.join(os.homedir(), p.slice(1)) : p;
}

// The machine's cores and memory capped by a container's limits (container-limits.ts).
const cpuCount = usableCores();
const split = inferenceSplit(cpuCount, usableMemory());
const SPLIT_TEXT = '1 up to 8 cores, then one per 8 cores; docs/benchmarks.md';
const BOTH: ServerCommand[] = ['serve', 'model-server'];
const on = (commands: ServerCommand[], flag: string): Partial<Record<ServerCommand, string>> => Object.fromEntries(commands.map((c) => [c, flag]));

/** The settings, in the order --help lists them. */
export const SETTINGS: readonly SettingRow[] = Object.freeze([
  // Where and what: shared by every command.
  { key: 'dataDir', flags: on(BOTH, '--data <dir>'), env: 'CUTOUT_HOME', default: path.join(os.homedir(), '.cutout'), defaultText: '~/.cutout', help: 'data directory: the SQLite database, results, generated secrets', parse: (v) => path.resolve(expandHome(str('dataDir', v))) },
  { key: 'configFile', flags: on(BOTH, '--config <file>'), env: 'CUTOUT_CONFIG', default: null, defaultText: 'found by cosmiconfig, module name "cutout"', help: 'config file', notInFile: true, parse: (v) => nullableStr('config', v) },
  { key: 'model', flags: on(BOTH, '--model <name|file>'), env: 'CUTOUT_MODEL', default: 'isnet-medium', defaultText: 'the default model', help: 'the model', parse: (v) => str('model', v) },
  // Two images in flight where there are two cores or more (docs/benchmarks.md, "The defaults chosen").
  { key: 'concurrency', flags: {}, env: null, default: cpuCount > 1 ? 2 * split.workers : 1, help: 'CLI: images processed at once', parse: (v) => int('concurrency', v, 1, 64) },
  { key: 'inferenceWorkers', flags: on(BOTH, '--inference-workers <n>'), env: 'CUTOUT_INFERENCE_WORKERS', default: split.workers, defaultText: SPLIT_TEXT, help: 'inference worker threads, each with its own session', parse: (v) => int('inferenceWorkers', v, 1, 64) },
  // CUTOUT_THREADS (older, for every command) still sets the default.
  { key: 'inferenceThreads', flags: on(BOTH, '--inference-threads <n>'), env: 'CUTOUT_INFERENCE_THREADS', default: Number(process.env.CUTOUT_THREADS) > 0 ? Math.floor(Number(process.env.CUTOUT_THREADS)) : split.threads, defaultText: 'the cores over the workers, or $CUTOUT_THREADS', help: 'intra-op threads of each session', parse: (v) => int('inferenceThreads', v, 1, 1024) },
  // The API's spelling of the name (`quality`) in the message, as for the other settings.
  { key: 'quality', flags: {}, env: 'CUTOUT_QUALITY', default: 'best', help: 'CLI: default --quality', parse: (v) => parseEnum('quality', QUALITIES, v, 'api') },
  { key: 'precision', flags: on(BOTH, '--precision <precision>'), env: 'CUTOUT_PRECISION', default: 'auto', help: 'auto | fp32 | int8: the default precision; the model server serves fp32 as NAME and int8 as NAME-int8, and serve --upstream asks for NAME-int8 with int8, for NAME with auto and fp32', parse: (v) => parseEnum('precision', PRECISIONS, v, 'api') },
  { key: 'preload', flags: { serve: '--preload' }, env: 'CUTOUT_PRELOAD', default: false, help: 'load the model before "listening" is printed; /readyz answers 503 naming the model until it is loaded (the container image sets it)', parse: (v) => bool('preload', v) },
  // serve: the HTTP API.
  { key: 'host', flags: { serve: '--host <host>' }, env: 'CUTOUT_HOST', default: '127.0.0.1', help: 'bind address', parse: (v) => str('host', v) },
  { key: 'port', flags: { serve: '--port <port>' }, env: 'CUTOUT_PORT', default: 8080, help: 'port; 0 picks a free one', parse: (v) => int('port', v, 0, 65535) },
  { key: 'baseUrl', flags: { serve: '--base-url <url>' }, env: 'CUTOUT_BASE_URL', default: null, defaultText: 'http://HOST:PORT', help: 'the {base_url} of result URLs', parse: (v) => httpUrl('baseUrl', v) },
  { key: 'workers', flags: { serve: '--workers <n>' }, env: 'CUTOUT_WORKERS', default: Math.max(1, Math.floor(cpuCount / 2)), defaultText: 'half the CPU count, at least 1', help: 'inference jobs run at once', parse: (v) => int('workers', v, 1, 64) },
  { key: 'queueLimit', flags: { serve: '--queue-limit <n>' }, env: 'CUTOUT_QUEUE_LIMIT', default: 100, help: 'jobs waiting before /jobs answers 503 gpu_unavailable', parse: (v) => int('queueLimit', v, 0, 1_000_000) },
  { key: 'syncTimeoutMs', flags: { serve: '--sync-timeout <ms>' }, env: 'CUTOUT_SYNC_TIMEOUT', default: LIMITS.syncTimeoutMs, help: 'hard timeout of POST /api/v1/remove', parse: (v) => int('syncTimeoutMs', v, 1, 3_600_000) },
  { key: 'rateLimit', flags: { serve: '--rate-limit <n>' }, env: 'CUTOUT_RATE_LIMIT', default: LIMITS.rateLimitPerMinute, help: 'requests per minute per key', parse: (v) => int('rateLimit', v, 1, 1_000_000) },
  { key: 'resultTtlSeconds', flags: { serve: '--result-ttl <seconds>' }, env: 'CUTOUT_RESULT_TTL', default: LIMITS.resultTtlSeconds, help: 'how long results can be downloaded', parse: (v) => int('resultTtlSeconds', v, 1, 365 * 86400) },
  { key: 'callbackBackoffMs', flags: { serve: '--callback-backoff <ms>' }, env: 'CUTOUT_CALLBACK_BACKOFF', default: 2000, help: 'first callback retry delay, doubling each retry; callbacks are signed with $CUTOUT_CALLBACK_SECRET or a secret kept in the data directory', parse: (v) => int('callbackBackoffMs', v, 1, 3_600_000) },
  { key: 'allowPrivateNetwork', flags: { serve: '--allow-private-network' }, env: 'CUTOUT_ALLOW_PRIVATE_NETWORK', default: false, help: 'let image_url and callback URLs reach loopback and private addresses (development and tests only)', parse: (v) => bool('allowPrivateNetwork', v) },
  { key: 'playground', flags: { serve: '--no-playground' }, env: 'CUTOUT_PLAYGROUND', default: true, help: 'do not serve the web playground page at /', parse: (v) => bool('playground', v) },
  { key: 'removebg', flags: { serve: '--no-removebg' }, env: 'CUTOUT_REMOVEBG', default: true, help: "do not answer remove.bg's API (POST /v1.0/removebg, GET /v1.0/account) nor rembg's (/api/remove)", parse: (v) => bool('removebg', v) },
  { key: 'photoroom', flags: { serve: '--no-photoroom' }, env: 'CUTOUT_PHOTOROOM', default: true, help: "do not answer Photoroom's API (POST /v1/segment, GET /v1/account, GET /v2/account)", parse: (v) => bool('photoroom', v) },
  { key: 'clipdrop', flags: { serve: '--no-clipdrop' }, env: 'CUTOUT_CLIPDROP', default: true, help: "do not answer Clipdrop's API (POST /remove-background/v1)", parse: (v) => bool('clipdrop', v) },
  { key: 'metrics', flags: { serve: '--no-metrics' }, env: 'CUTOUT_METRICS', default: true, help: 'do not serve Prometheus metrics at /metrics', parse: (v) => bool('metrics', v) },
  { key: 'metricsPort', flags: { serve: '--metrics-port <port>' }, env: 'CUTOUT_METRICS_PORT', default: null, defaultText: 'on the API port', help: 'serve /metrics on a listener of its own on this port, not on the API port (recommended: a port only the scraper reaches, as Triton uses 8002); 0 picks a free one', parse: (v) => (v === null ? null : int('metricsPort', v, 0, 65535)) },
  { key: 'metricsHost', flags: { serve: '--metrics-host <host>' }, env: 'CUTOUT_METRICS_HOST', default: null, defaultText: '--host', help: 'bind address of the --metrics-port listener', parse: (v) => nullableStr('metricsHost', v) },
  { key: 'logLevel', flags: { serve: '--log-level <level>' }, env: 'CUTOUT_LOG_LEVEL', default: 'info', help: 'lowest level of the JSON request log on stdout: trace, debug, info, warn, error, fatal or silent', parse: (v) => {
    if (typeof v !== 'string' || !(LOG_LEVELS as readonly string[]).includes(v)) fail('logLevel', `one of ${LOG_LEVELS.join(', ')}`, v);
    return v as LogLevel;
  } },
  { key: 'callbackSecret', flags: {}, env: 'CUTOUT_CALLBACK_SECRET', default: null, defaultText: 'generated once, kept in the data directory', help: 'HMAC-SHA256 key that signs callbacks', secret: true, parse: (v) => nullableStr('callbackSecret', v) },
  { key: 'marketplaceSecret', flags: {}, env: 'CUTOUT_MARKETPLACE_SECRET', default: null, defaultText: 'unset: marketplace headers are ignored', help: 'shared secret that a marketplace proxy sends in X-Marketplace-Proxy-Secret', secret: true, parse: (v) => nullableStr('marketplaceSecret', v) },
  { key: 'store', flags: { serve: '--store <url>' }, env: 'CUTOUT_STORE', default: null, defaultText: 'SQLite in the data directory', help: 'where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet', secret: true, parse: (v) => {
    const s = nullableStr('store', v);
    // The value may hold a password: it is not repeated in the message.
    if (s !== null && !/^postgres(ql)?:\/\/\S+$/i.test(s)) fail('store', 'a postgres:// or postgresql:// URL', redactUrl(s));
    return s;
  } },
  { key: 'results', flags: { serve: '--results <url>' }, env: 'CUTOUT_RESULTS', default: null, defaultText: 'the data directory, or PostgreSQL with --store', help: "keep result images in an S3-compatible object store, s3://BUCKET[/PREFIX], configured by the AWS SDK's variables (AWS_REGION, AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL_S3, ...)", parse: (v) => {
    const s = nullableStr('results', v);
    if (s !== null && !/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/\S*)?$/i.test(s)) fail('results', 's3://BUCKET[/PREFIX]', s);
    return s;
  } },
  { key: 'resultsPathStyle', flags: { serve: '--results-path-style' }, env: 'CUTOUT_RESULTS_PATH_STYLE', default: false, help: 'path-style addressing for the object store of --results (MinIO and most self-hosted stores)', parse: (v) => bool('resultsPathStyle', v) },
  { key: 'resultsRedirect', flags: { serve: '--results-redirect' }, env: 'CUTOUT_RESULTS_REDIRECT', default: false, help: 'GET /api/v1/results/{id} answers 302 to a presigned URL of the object store (valid until the result expires, at most 7 days) instead of streaming it', parse: (v) => bool('resultsRedirect', v) },
  { key: 'leaseMs', flags: { serve: '--lease-ms <ms>' }, env: 'CUTOUT_LEASE_MS', default: LIMITS.jobLeaseMs, help: "how long a claimed job stays with its server without a renewal; a dead server's jobs are taken over after it", parse: (v) => int('leaseMs', v, LIMITS.minJobLeaseMs, LIMITS.maxJobLeaseMs) },
  { key: 'upstream', flags: { serve: '--upstream <url>' }, env: 'CUTOUT_UPSTREAM', default: null, defaultText: 'local', help: 'run the model on an Open Inference Protocol v2 server (Triton, KServe, cutout model-server)', parse: (v) => httpUrl('upstream', v) },
  { key: 'upstreamModel', flags: { serve: '--upstream-model <name>' }, env: 'CUTOUT_UPSTREAM_MODEL', default: null, defaultText: "the local model's name", help: "the model's name on the upstream", parse: (v) => nullableStr('upstreamModel', v) },
  { key: 'upstreamToken', flags: { serve: '--upstream-token <token>' }, env: 'CUTOUT_UPSTREAM_TOKEN', default: null, defaultText: 'none', help: 'sent to the upstream as "Authorization: Bearer TOKEN" (a model server\'s --token)', secret: true, parse: (v) => token('upstreamToken', v) },
  { key: 'exitWithParent', flags: { serve: '--no-exit-with-parent' }, env: 'CUTOUT_EXIT_WITH_PARENT', default: true, help: "keep serving when the process that started serve exits (nohup, a shell's &); by default serve then stops as on SIGTERM, so that npx cutout serve cannot leave it orphaned (a container's entry point and systemd are not watched)", parse: (v) => bool('exitWithParent', v) },
  // model-server: its own address and token, never serve's (opening serve must not open it).
  { key: 'modelServerHost', flags: { 'model-server': '--host <host>' }, env: 'CUTOUT_MODEL_SERVER_HOST', default: '127.0.0.1', help: 'bind address', parse: (v) => str('modelServerHost', v) },
  // Triton's HTTP port.
  { key: 'modelServerPort', flags: { 'model-server': '--port <port>' }, env: 'CUTOUT_MODEL_SERVER_PORT', default: 8000, help: 'port; 0 picks a free one (8000, as Triton)', parse: (v) => int('modelServerPort', v, 0, 65535) },
  { key: 'modelServerToken', flags: { 'model-server': '--token <token>' }, env: 'CUTOUT_MODEL_SERVER_TOKEN', default: null, defaultText: 'none', help: 'require "Authorization: Bearer TOKEN" on every endpoint but /v2/health/*', secret: true, parse: (v) => token('modelServerToken', v) },
] satisfies SettingRow[]);

/** commander's attribute name for a flag: `--rate-limit <n>` -> rateLimit, `--no-playground` -> playground. */
export function flagAttribute(flag: string): string {
  const long = flag.split(/[ ,]/)[0].replace(/^--(no-)?/, '');
  return long.replace(/-([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** The rows a command has flags for, in table order. */
export function settingsOf(command: ServerCommand): (SettingRow & { flag: string })[] {
  return SETTINGS.flatMap((r) => (r.flags[command] ? [{ ...r, flag: r.flags[command] }] : []));
}

/** The help of a row as --help shows it: what it does, its variable and its default. */
export function settingHelp(row: SettingRow): string {
  const negated = Object.values(row.flags).some((f) => f?.startsWith('--no-'));
  const shown = row.defaultText ?? (row.default === null || negated ? null : String(row.default));
  const env = row.env && `env ${row.env}${negated ? '=false' : ''}${row.secret ? ` or ${row.env}_FILE` : ''}`;
  const parts = [env || null, shown !== null ? `default ${shown}` : null].filter(Boolean);
  return parts.length ? `${row.help} (${parts.join('; ')})` : row.help;
}
