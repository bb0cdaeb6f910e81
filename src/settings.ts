/**
 * The settings table: one row per setting, read by the config loader (config.ts: defaults,
 * parsers, environment variables, `_FILE` secrets, the config file's keys), by the types (the
 * config's type is made from the rows), by commander (every command registers its setting flags
 * from it, commands/setting-flags.ts), by the docs (docs/deploy.md's table is written from it) and
 * by the completions (written from the program's flags, checked against it). A new setting is one
 * row here; a variable read outside the configuration is a `process` row (test/settings-variables.test.ts).
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
import { parseColor, parseEnum, parseFormat, PRECISIONS, QUALITIES, SIZES } from './options.js';
import { inferenceSplit } from './pipeline/inference-split.js';
import { redactUrl } from './store/url.js';
import { usableCores, usableMemory } from './container-limits.js';

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The commands whose flags come from this table (a command's subcommands share its flags: `keys create`). */
export const COMMANDS = ['remove', 'serve', 'model-server', 'keys', 'credits', 'account', 'usage', 'models', 'openapi', 'health', 'completion'] as const;
export type CommandName = (typeof COMMANDS)[number];
/** The servers: their every flag has a variable, and --help says it (cli-contract "Settings from the environment"). */
export type ServerCommand = 'serve' | 'model-server';
export const SERVER_COMMANDS: readonly CommandName[] = ['serve', 'model-server'];

/**
 * Where a row's value goes. `config`: a field of CutoutConfig, resolved by loadConfig from flag,
 * variable, config file and default. `remove`: a `cutout remove` flag that a project's config file
 * may set as its default (CutoutConfig's `remove`; the flag given wins, withRemoveDefaults).
 * `process`: a variable read where it acts, before or beside the configuration (the launcher, the
 * inference worker), listed here so that every variable is a row; loadConfig does not read it.
 */
export type SettingScope = 'config' | 'remove' | 'process';

export interface SettingRow<K extends string = string, T = unknown, S extends SettingScope = SettingScope> {
  /** The field of CutoutConfig (or of its `remove`), and the config file's key. */
  key: K;
  scope: S;
  /** The commander flag, as given to `.option()`, in each command that has it. */
  flags: Partial<Record<CommandName, string>>;
  /** The environment variable; null: none (a CLI-only setting). */
  env: string | null;
  /** Checks and converts a value from any source (flag, environment, file, default). */
  parse: (v: unknown) => T;
  default: T;
  /** The default in words for --help and the docs where it is computed (from the CPU count, ...). */
  defaultText?: string;
  help: string;
  /** The help of its flag on the commands that are not servers (remove, keys, ...), shown as written. */
  cliHelp?: string;
  /** The values its flag takes, for the shell completions (a free value or a switch: none). */
  values?: readonly string[];
  /** Read also from `<env>_FILE`; never shown in a message. */
  secret?: boolean;
  /** Not a key of the config file (the file's own path; a `process` variable). */
  notInFile?: boolean;
  /** A `process` row: the module that reads the variable. */
  readBy?: string;
}

type RowInput<K extends string, T> = Omit<SettingRow<K, T, 'config'>, 'scope' | 'default'> & { default: NoInfer<T> };

/** A setting of CutoutConfig: its type is what `parse` returns. */
function setting<const K extends string, T>(row: RowInput<K, T>): SettingRow<K, T, 'config'> {
  return { ...row, scope: 'config' };
}

/** A `cutout remove` flag a config file may set (no variable: a project's file, not a machine's setting). */
function removeDefault<const K extends string, T>(row: Omit<SettingRow<K, T, 'remove'>, 'scope' | 'default' | 'env'>): SettingRow<K, T | undefined, 'remove'> {
  return { ...row, scope: 'remove', env: null, default: undefined };
}

/** A variable read where it acts, outside the configuration (see SettingScope). */
function processVariable<const K extends string>(row: Pick<SettingRow<K>, 'key' | 'help' | 'defaultText' | 'readBy'> & { env: string }): SettingRow<K, string | null, 'process'> {
  return { ...row, scope: 'process', flags: {}, notInFile: true, default: null, parse: (v) => (typeof v === 'string' ? v : null) };
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
const BOTH: readonly CommandName[] = SERVER_COMMANDS;
/** The commands that read or write accounts, keys, credits, jobs or results: `--store` (cli-contract "Where state lives"). */
const STORE_COMMANDS: readonly CommandName[] = ['remove', 'serve', 'keys', 'credits', 'account', 'usage'];
const on = (commands: readonly CommandName[], flag: string): Partial<Record<CommandName, string>> => Object.fromEntries(commands.map((c) => [c, flag]));
/** The variable of the older intra-op thread setting (a `process` row below; inference-thread.ts reads it too). */
const THREADS_ENV = 'CUTOUT_THREADS';
const threadsFromEnv = Number(process.env[THREADS_ENV]);

/** The settings, in the order --help lists them. */
export const SETTINGS = Object.freeze([
  // Where and what: shared by every command.
  setting({ key: 'dataDir', flags: on(COMMANDS, '--data <dir>'), cliHelp: 'data directory (default: $CUTOUT_HOME or ~/.cutout)', env: 'CUTOUT_HOME', default: path.join(os.homedir(), '.cutout'), defaultText: '~/.cutout', help: 'data directory: the SQLite database, results, generated secrets', parse: (v) => path.resolve(expandHome(str('dataDir', v))) }),
  setting({ key: 'configFile', flags: on(COMMANDS, '--config <file>'), cliHelp: 'config file (default: found by cosmiconfig, module name "cutout")', env: 'CUTOUT_CONFIG', default: null, defaultText: 'found by cosmiconfig, module name "cutout"', help: 'config file', notInFile: true, parse: (v) => nullableStr('config', v) }),
  setting({ key: 'model', flags: on(['remove', ...BOTH], '--model <name|file>'), cliHelp: 'a model from `cutout models list`, or an .onnx file with its manifest', env: 'CUTOUT_MODEL', default: 'isnet-medium', defaultText: 'the default model', help: 'the model', parse: (v) => str('model', v) }),
  // Two images in flight where there are two cores or more (docs/benchmarks.md, "The defaults chosen").
  setting({ key: 'concurrency', flags: { remove: '-c, --concurrency <n>' }, cliHelp: 'images processed at once (default: 2 with two cores or more: one image\'s decode and encode beside the other\'s inference; inferences run one at a time)', env: null, default: cpuCount > 1 ? 2 * split.workers : 1, help: 'CLI: images processed at once', parse: (v) => int('concurrency', v, 1, 64) }),
  setting({ key: 'inferenceWorkers', flags: on(['remove', ...BOTH], '--inference-workers <n>'), cliHelp: 'inference worker threads, each with its own session (default: 1 up to 8 cores, then one per 8 cores; docs/benchmarks.md)', env: 'CUTOUT_INFERENCE_WORKERS', default: split.workers, defaultText: SPLIT_TEXT, help: 'inference worker threads, each with its own session', parse: (v) => int('inferenceWorkers', v, 1, 64) }),
  // CUTOUT_THREADS (older, for every command) still sets the default.
  setting({ key: 'inferenceThreads', flags: on(['remove', ...BOTH], '--inference-threads <n>'), cliHelp: 'intra-op threads of each session (default: the cores over the workers; env CUTOUT_THREADS)', env: 'CUTOUT_INFERENCE_THREADS', default: threadsFromEnv > 0 ? Math.floor(threadsFromEnv) : split.threads, defaultText: 'the cores over the workers, or $CUTOUT_THREADS', help: 'intra-op threads of each session', parse: (v) => int('inferenceThreads', v, 1, 1024) }),
  // The API's spelling of the name (`quality`) in the message, as for the other settings.
  setting({ key: 'quality', flags: {}, env: 'CUTOUT_QUALITY', default: 'best', help: 'CLI: default --quality', parse: (v) => parseEnum('quality', QUALITIES, v, 'api') }),
  setting({ key: 'precision', flags: on(BOTH, '--precision <precision>'), values: PRECISIONS, env: 'CUTOUT_PRECISION', default: 'auto', help: 'auto | fp32 | int8: the default precision; the model server serves fp32 as NAME and int8 as NAME-int8, and serve --upstream asks for NAME-int8 with int8, for NAME with auto and fp32', parse: (v) => parseEnum('precision', PRECISIONS, v, 'api') }),
  setting({ key: 'preload', flags: { serve: '--preload' }, env: 'CUTOUT_PRELOAD', default: false, help: 'load the model before "listening" is printed; /readyz answers 503 naming the model until it is loaded (the container image sets it)', parse: (v) => bool('preload', v) }),
  // serve: the HTTP API.
  setting({ key: 'host', flags: { serve: '--host <host>' }, env: 'CUTOUT_HOST', default: '127.0.0.1', help: 'bind address', parse: (v) => str('host', v) }),
  setting({ key: 'port', flags: { serve: '--port <port>' }, env: 'CUTOUT_PORT', default: 8080, help: 'port; 0 picks a free one', parse: (v) => int('port', v, 0, 65535) }),
  setting({ key: 'baseUrl', flags: { serve: '--base-url <url>' }, env: 'CUTOUT_BASE_URL', default: null, defaultText: 'http://HOST:PORT', help: 'the {base_url} of result URLs', parse: (v) => httpUrl('baseUrl', v) }),
  setting({ key: 'workers', flags: { serve: '--workers <n>' }, env: 'CUTOUT_WORKERS', default: Math.max(1, Math.floor(cpuCount / 2)), defaultText: 'half the CPU count, at least 1', help: 'inference jobs run at once', parse: (v) => int('workers', v, 1, 64) }),
  setting({ key: 'queueLimit', flags: { serve: '--queue-limit <n>' }, env: 'CUTOUT_QUEUE_LIMIT', default: 100, help: 'jobs waiting before /jobs answers 503 gpu_unavailable', parse: (v) => int('queueLimit', v, 0, 1_000_000) }),
  setting({ key: 'syncTimeoutMs', flags: { serve: '--sync-timeout <ms>' }, env: 'CUTOUT_SYNC_TIMEOUT', default: LIMITS.syncTimeoutMs, help: 'hard timeout of POST /api/v1/remove', parse: (v) => int('syncTimeoutMs', v, 1, 3_600_000) }),
  setting({ key: 'rateLimit', flags: { serve: '--rate-limit <n>' }, env: 'CUTOUT_RATE_LIMIT', default: LIMITS.rateLimitPerMinute, help: 'requests per minute per key', parse: (v) => int('rateLimit', v, 1, 1_000_000) }),
  setting({ key: 'resultTtlSeconds', flags: { serve: '--result-ttl <seconds>' }, env: 'CUTOUT_RESULT_TTL', default: LIMITS.resultTtlSeconds, help: 'how long results can be downloaded', parse: (v) => int('resultTtlSeconds', v, 1, 365 * 86400) }),
  setting({ key: 'callbackBackoffMs', flags: { serve: '--callback-backoff <ms>' }, env: 'CUTOUT_CALLBACK_BACKOFF', default: 2000, help: 'first callback retry delay, doubling each retry; callbacks are signed with $CUTOUT_CALLBACK_SECRET or a secret kept in the data directory', parse: (v) => int('callbackBackoffMs', v, 1, 3_600_000) }),
  setting({ key: 'allowPrivateNetwork', flags: { serve: '--allow-private-network' }, env: 'CUTOUT_ALLOW_PRIVATE_NETWORK', default: false, help: 'let image_url and callback URLs reach loopback and private addresses (development and tests only)', parse: (v) => bool('allowPrivateNetwork', v) }),
  setting({ key: 'playground', flags: { serve: '--no-playground' }, env: 'CUTOUT_PLAYGROUND', default: true, help: 'do not serve the web playground page at /', parse: (v) => bool('playground', v) }),
  setting({ key: 'removebg', flags: { serve: '--no-removebg' }, env: 'CUTOUT_REMOVEBG', default: true, help: "do not answer remove.bg's API (POST /v1.0/removebg, GET /v1.0/account) nor rembg's (/api/remove)", parse: (v) => bool('removebg', v) }),
  setting({ key: 'photoroom', flags: { serve: '--no-photoroom' }, env: 'CUTOUT_PHOTOROOM', default: true, help: "do not answer Photoroom's API (POST /v1/segment, GET /v1/account, GET /v2/account)", parse: (v) => bool('photoroom', v) }),
  setting({ key: 'clipdrop', flags: { serve: '--no-clipdrop' }, env: 'CUTOUT_CLIPDROP', default: true, help: "do not answer Clipdrop's API (POST /remove-background/v1)", parse: (v) => bool('clipdrop', v) }),
  setting({ key: 'metrics', flags: { serve: '--no-metrics' }, env: 'CUTOUT_METRICS', default: true, help: 'do not serve Prometheus metrics at /metrics', parse: (v) => bool('metrics', v) }),
  setting({ key: 'metricsPort', flags: { serve: '--metrics-port <port>' }, env: 'CUTOUT_METRICS_PORT', default: null, defaultText: 'on the API port', help: 'serve /metrics on a listener of its own on this port, not on the API port (recommended: a port only the scraper reaches, as Triton uses 8002); 0 picks a free one', parse: (v) => (v === null ? null : int('metricsPort', v, 0, 65535)) }),
  setting({ key: 'metricsHost', flags: { serve: '--metrics-host <host>' }, env: 'CUTOUT_METRICS_HOST', default: null, defaultText: '--host', help: 'bind address of the --metrics-port listener', parse: (v) => nullableStr('metricsHost', v) }),
  setting({ key: 'logLevel', flags: { serve: '--log-level <level>' }, values: LOG_LEVELS, env: 'CUTOUT_LOG_LEVEL', default: 'info', help: 'lowest level of the JSON request log on stdout: trace, debug, info, warn, error, fatal or silent', parse: (v) => {
    if (typeof v !== 'string' || !(LOG_LEVELS as readonly string[]).includes(v)) fail('logLevel', `one of ${LOG_LEVELS.join(', ')}`, v);
    return v as LogLevel;
  } }),
  setting({ key: 'callbackSecret', flags: {}, env: 'CUTOUT_CALLBACK_SECRET', default: null, defaultText: 'generated once, kept in the data directory', help: 'HMAC-SHA256 key that signs callbacks', secret: true, parse: (v) => nullableStr('callbackSecret', v) }),
  setting({ key: 'marketplaceSecret', flags: {}, env: 'CUTOUT_MARKETPLACE_SECRET', default: null, defaultText: 'unset: marketplace headers are ignored', help: 'shared secret that a marketplace proxy sends in X-Marketplace-Proxy-Secret', secret: true, parse: (v) => nullableStr('marketplaceSecret', v) }),
  // Off unless set: with no token the admin routes answer 404, as if they did not exist.
  setting({ key: 'adminToken', flags: { serve: '--admin-token <token>' }, env: 'CUTOUT_ADMIN_TOKEN', default: null, defaultText: 'unset: the admin API answers 404', help: 'turn on the admin API under /api/v1/admin/ (keys, credits, the audit trail) for "Authorization: Bearer TOKEN", at least 24 characters; prefer CUTOUT_ADMIN_TOKEN_FILE to a flag, which other users may see in the process list', secret: true, parse: (v) => {
    const t = token('adminToken', v);
    if (t !== null && t.length < 24) throw new CutoutError('invalid_request', 'Expected an admin token of at least 24 characters for adminToken');
    return t;
  } }),
  setting({ key: 'store', flags: on(STORE_COMMANDS, '--store <url>'), cliHelp: 'where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet (env CUTOUT_STORE; default: SQLite in the data directory)', env: 'CUTOUT_STORE', default: null, defaultText: 'SQLite in the data directory', help: 'where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet', secret: true, parse: (v) => {
    const s = nullableStr('store', v);
    // The value may hold a password: it is not repeated in the message.
    if (s !== null && !/^postgres(ql)?:\/\/\S+$/i.test(s)) fail('store', 'a postgres:// or postgresql:// URL', redactUrl(s));
    return s;
  } }),
  setting({ key: 'results', flags: { serve: '--results <url>' }, env: 'CUTOUT_RESULTS', default: null, defaultText: 'the data directory, or PostgreSQL with --store', help: "keep result images in an S3-compatible object store, s3://BUCKET[/PREFIX], configured by the AWS SDK's variables (AWS_REGION, AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL_S3, ...)", parse: (v) => {
    const s = nullableStr('results', v);
    if (s !== null && !/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/\S*)?$/i.test(s)) fail('results', 's3://BUCKET[/PREFIX]', s);
    return s;
  } }),
  setting({ key: 'resultsPathStyle', flags: { serve: '--results-path-style' }, env: 'CUTOUT_RESULTS_PATH_STYLE', default: false, help: 'path-style addressing for the object store of --results (MinIO and most self-hosted stores)', parse: (v) => bool('resultsPathStyle', v) }),
  setting({ key: 'resultsRedirect', flags: { serve: '--results-redirect' }, env: 'CUTOUT_RESULTS_REDIRECT', default: false, help: 'GET /api/v1/results/{id} answers 302 to a presigned URL of the object store (valid until the result expires, at most 7 days) instead of streaming it', parse: (v) => bool('resultsRedirect', v) }),
  setting({ key: 'leaseMs', flags: { serve: '--lease-ms <ms>' }, env: 'CUTOUT_LEASE_MS', default: LIMITS.jobLeaseMs, help: "how long a claimed job stays with its server without a renewal; a dead server's jobs are taken over after it", parse: (v) => int('leaseMs', v, LIMITS.minJobLeaseMs, LIMITS.maxJobLeaseMs) }),
  setting({ key: 'upstream', flags: { serve: '--upstream <url>' }, env: 'CUTOUT_UPSTREAM', default: null, defaultText: 'local', help: 'run the model on an Open Inference Protocol v2 server (Triton, KServe, cutout model-server)', parse: (v) => httpUrl('upstream', v) }),
  setting({ key: 'upstreamModel', flags: { serve: '--upstream-model <name>' }, env: 'CUTOUT_UPSTREAM_MODEL', default: null, defaultText: "the local model's name", help: "the model's name on the upstream", parse: (v) => nullableStr('upstreamModel', v) }),
  setting({ key: 'upstreamToken', flags: { serve: '--upstream-token <token>' }, env: 'CUTOUT_UPSTREAM_TOKEN', default: null, defaultText: 'none', help: 'sent to the upstream as "Authorization: Bearer TOKEN" (a model server\'s --token)', secret: true, parse: (v) => token('upstreamToken', v) }),
  setting({ key: 'exitWithParent', flags: { serve: '--no-exit-with-parent' }, env: 'CUTOUT_EXIT_WITH_PARENT', default: true, help: "keep serving when the process that started serve exits (nohup, a shell's &); by default serve then stops as on SIGTERM, so that npx cutout serve cannot leave it orphaned (a container's entry point and systemd are not watched)", parse: (v) => bool('exitWithParent', v) }),
  // model-server: its own address and token, never serve's (opening serve must not open it).
  setting({ key: 'modelServerHost', flags: { 'model-server': '--host <host>' }, env: 'CUTOUT_MODEL_SERVER_HOST', default: '127.0.0.1', help: 'bind address', parse: (v) => str('modelServerHost', v) }),
  // Triton's HTTP port.
  setting({ key: 'modelServerPort', flags: { 'model-server': '--port <port>' }, env: 'CUTOUT_MODEL_SERVER_PORT', default: 8000, help: 'port; 0 picks a free one (8000, as Triton)', parse: (v) => int('modelServerPort', v, 0, 65535) }),
  setting({ key: 'modelServerToken', flags: { 'model-server': '--token <token>' }, env: 'CUTOUT_MODEL_SERVER_TOKEN', default: null, defaultText: 'none', help: 'require "Authorization: Bearer TOKEN" on every endpoint but /v2/health/*', secret: true, parse: (v) => token('modelServerToken', v) }),
  // The config file's defaults of `cutout remove`'s flags, under the flag's camelCase name (`bgColor`
  // for --bg-color); a flag given wins (config.ts, withRemoveDefaults). The flags of size ... decontaminate
  // are the options table's (src/options.ts, image-flags.ts). Left out on purpose: `key` (a secret, not
  // for a file a project commits), `json`, `quiet`, `progress` (how one call reports, a script's choice).
  removeDefault({ key: 'out', flags: { remove: '-o, --out <path>' }, help: 'output directory, or a file when there is one input; - for stdout', parse: (v) => str('out', v) }),
  removeDefault({ key: 'size', flags: {}, help: 'default --size', parse: (v) => parseEnum('size', SIZES, v, 'api') }),
  removeDefault({ key: 'format', flags: {}, help: 'default --format', parse: (v) => parseFormat(v, 'api') }),
  // As written (`#fff`, `transparent`): parsed with the flag's value.
  removeDefault({ key: 'bgColor', flags: {}, help: 'default --bg-color', parse: (v) => (parseColor(v, 'api', 'bgColor'), String(v)) }),
  removeDefault({ key: 'crop', flags: {}, help: 'default --crop', parse: (v) => bool('crop', v) }),
  removeDefault({ key: 'mask', flags: {}, help: 'default --mask', parse: (v) => bool('mask', v) }),
  removeDefault({ key: 'alpha', flags: {}, help: 'default --alpha', parse: (v) => parseEnum('alpha', ['soft', 'hard'] as const, v, 'api') }),
  removeDefault({ key: 'refine', flags: {}, help: 'false: default --no-refine', parse: (v) => bool('refine', v) }),
  removeDefault({ key: 'decontaminate', flags: {}, help: 'false: default --no-decontaminate', parse: (v) => bool('decontaminate', v) }),
  removeDefault({ key: 'recursive', flags: { remove: '-r, --recursive' }, help: 'descend into sub-directories of directory inputs', parse: (v) => bool('recursive', v) }),
  removeDefault({ key: 'skipExisting', flags: { remove: '--skip-existing' }, help: 'skip inputs whose output exists', parse: (v) => bool('skipExisting', v) }),
  removeDefault({ key: 'overwrite', flags: { remove: '--overwrite' }, help: 'replace existing outputs', parse: (v) => bool('overwrite', v) }),
  // Read where they act, not by the configuration: before the program loads, or in the worker thread.
  processVariable({ key: 'hugePages', env: 'CUTOUT_HUGEPAGES', defaultText: 'off', help: "1: the launcher (bin/cutout) starts node again with glibc's huge-page tunable for the model's memory; 0: never (docs/internals.md, \"Huge pages\")", readBy: 'src/launcher/hugepages.ts, before the program loads' }),
  processVariable({ key: 'threads', env: THREADS_ENV, defaultText: 'unset', help: 'the older name of the intra-op thread count, for every command: the default of --inference-threads', readBy: 'src/pipeline/inference-thread.ts; src/settings.ts (the default of inferenceThreads)' }),
  processVariable({ key: 'ortCache', env: 'CUTOUT_ORT_CACHE', defaultText: 'on', help: "0: no onnxruntime optimised copy of the model is made or used (the benches)", readBy: 'src/pipeline/inference-worker.ts, in the worker thread' }),
  processVariable({ key: 'arena', env: 'CUTOUT_ARENA', defaultText: 'by image size and precision', help: "0 or 1: turn onnxruntime's CPU memory arena off or on for every run (the benches; docs/internals.md, \"The inference seam\")", readBy: 'src/pipeline/model.ts' }),
] as const);

/** A row of the table, as typed by its own literal (its key, its value's type, its scope). */
export type Row = (typeof SETTINGS)[number];
type ValueOf<R> = R extends SettingRow<string, infer T> ? T : never;

/** The settings loadConfig resolves: one field per `config` row, typed by what its `parse` returns. */
export type Settings = { [R in Extract<Row, { scope: 'config' }> as R['key']]: ValueOf<R> };

/** `cutout remove`'s flag defaults from the config file: one optional field per `remove` row. */
export type RemoveDefaults = { [R in Extract<Row, { scope: 'remove' }> as R['key']]?: Exclude<ValueOf<R>, undefined> };

/** The rows of one scope, in table order. */
export function rowsOf<S extends SettingScope>(scope: S): Extract<Row, { scope: S }>[] {
  return SETTINGS.filter((r): r is Extract<Row, { scope: S }> => r.scope === scope);
}

/** The keys a config file may hold: the `config` rows but the file's own path, then the `remove` rows. */
export const FILE_KEYS: readonly string[] = Object.freeze(SETTINGS.filter((r) => r.scope !== 'process' && !('notInFile' in r && r.notInFile)).map((r) => r.key));

/** commander's attribute name for a flag: `--rate-limit <n>` -> rateLimit, `--no-playground` -> playground, `-o, --out <path>` -> out. */
export function flagAttribute(flag: string): string {
  const long = (flag.split(/[ ,]+/).find((w) => w.startsWith('--')) ?? flag).replace(/^--(no-)?/, '');
  return long.replace(/-([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** The rows a command has flags for, in table order. */
export function settingsOf(command: CommandName): (SettingRow & { flag: string })[] {
  return (SETTINGS as readonly SettingRow[]).flatMap((r) => (r.flags[command] ? [{ ...r, flag: r.flags[command] }] : []));
}

/**
 * The help of a row as --help shows it. On a server: what it does, its variable and its default.
 * Elsewhere (remove, keys, ...): its `cliHelp` as written, else its help.
 */
export function settingHelp(row: SettingRow, command: CommandName = 'serve'): string {
  if (!SERVER_COMMANDS.includes(command)) return row.cliHelp ?? row.help;
  const negated = Object.values(row.flags).some((f) => f?.startsWith('--no-'));
  const shown = row.defaultText ?? (row.default === null || negated ? null : String(row.default));
  const env = row.env && `env ${row.env}${negated ? '=false' : ''}${row.secret ? ` or ${row.env}_FILE` : ''}`;
  const parts = [env || null, shown !== null ? `default ${shown}` : null].filter(Boolean);
  return parts.length ? `${row.help} (${parts.join('; ')})` : row.help;
}
