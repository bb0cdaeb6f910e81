/**
 * Configuration, resolved once: command-line flag > environment variable > config file (found by
 * cosmiconfig under the module name `cutout`, or given with --config) > built-in default.
 * Validated here, then frozen; nothing else reads process.env for settings.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { requireCjs } from './cjs.js';
import { CutoutError, isPermissionError } from './errors.js';
import { LIMITS } from './limits.js';
import { redactUrl } from './store/url.js';
import { parseColor, parseEnum, parseFormat, PRECISIONS, QUALITIES, SIZES, type ImageFormat, type Precision, type Quality, type Size } from './options.js';
import { inferenceSplit } from './pipeline/inference-split.js';

export interface CutoutConfig {
  /** Data directory: SQLite database, results, generated secrets. */
  dataDir: string;
  /** Default model name or .onnx path. */
  model: string;
  /** CLI: images processed at once. */
  concurrency: number;
  /** Local inference worker threads, each with its own session (inference-split.ts's rule by default). */
  inferenceWorkers: number;
  /** Intra-op threads of each session (the same rule; CUTOUT_THREADS overrides it too). */
  inferenceThreads: number;
  /** CLI: default `--quality` (speed against quality). */
  quality: Quality;
  /** Default `--precision` / API `precision`: fp32, int8, or auto (int8 where it is fast and good enough). */
  precision: Precision;
  /** serve: bind address. */
  host: string;
  /** serve: port; 0 picks a free one. */
  port: number;
  /** serve: `{base_url}` of result URLs; null means http://host:port. */
  baseUrl: string | null;
  /** serve: inference jobs run at once. */
  workers: number;
  /** serve: jobs waiting before /jobs answers 503. */
  queueLimit: number;
  /** serve: sync hard timeout. */
  syncTimeoutMs: number;
  /** serve: requests per minute per key. */
  rateLimit: number;
  /** serve: result retention. */
  resultTtlSeconds: number;
  /** serve: first callback retry delay. */
  callbackBackoffMs: number;
  /** serve: let image_url and callbacks reach private addresses. */
  allowPrivateNetwork: boolean;
  /** serve: serve the playground page at `/`. */
  playground: boolean;
  /** serve: answer remove.bg's API v1.0 (`/v1.0/removebg`, `/v1.0/account`) and rembg's (`/api/remove`). */
  removebg: boolean;
  /** serve: serve Prometheus metrics at `/metrics`. */
  metrics: boolean;
  /** serve: serve `/metrics` on a listener of its own on this port (0 picks a free one); null: on the API's port. */
  metricsPort: number | null;
  /** serve: bind address of the metrics listener; null: the API's `host`. */
  metricsHost: string | null;
  /** serve: the lowest level of the JSON request log on stdout (`silent` turns it off). */
  logLevel: LogLevel;
  /** HMAC key for callbacks; null: generated once and kept in the data directory. */
  callbackSecret: string | null;
  /** Shared secret of a marketplace proxy; null: marketplace headers are ignored. */
  marketplaceSecret: string | null;
  /** Where state lives: a postgres:// URL shared by a fleet; null: SQLite in the data directory. */
  store: string | null;
  /** serve: where result images live: `s3://BUCKET[/PREFIX]`; null: the store's own place (files, or PostgreSQL). */
  results: string | null;
  /** serve: path-style addressing for the object store of `results`. */
  resultsPathStyle: boolean;
  /** serve: GET /results/{id} answers 302 to a presigned URL of the object store instead of streaming it. */
  resultsRedirect: boolean;
  /** serve: how long a claimed job stays with its server without a renewal. */
  leaseMs: number;
  /** serve: an Open Inference Protocol server that runs the model; null: the local worker thread. */
  upstream: string | null;
  /** serve: the model's name on the upstream; null: the manifest's name. */
  upstreamModel: string | null;
  /** serve: the bearer token sent to the upstream (`--upstream-token`); null: none. */
  upstreamToken: string | null;
  /** model-server: bind address (never serve's `host`: opening serve must not open the model server). */
  modelServerHost: string;
  /** model-server: port; 0 picks a free one. */
  modelServerPort: number;
  /** model-server: the bearer token every endpoint but /v2/health/* requires; null: none. */
  modelServerToken: string | null;
  /** `cutout remove`'s output defaults from the config file (REMOVE_DEFAULT_KEYS); its flags override them. */
  remove: Readonly<RemoveDefaults>;
}

/**
 * The `cutout remove` flags a project may set in its config file, under the flag's camelCase
 * name (`bgColor` for `--bg-color`, `skipExisting` for `--skip-existing`); a flag given overrides
 * the file. The other remove flags are settings of their own above (`model`, `quality`,
 * `precision`, `concurrency`, `inferenceWorkers`, `inferenceThreads`, `dataDir`, `store`), or are
 * left out on purpose: `key` (a secret, not for a file a project commits), `json`, `quiet`,
 * `progress` (how one call reports, a script's choice) and `config`. Listed here until the option
 * table (options.ts) can give this list; each value is checked as the flag's would be.
 */
export interface RemoveDefaults {
  /** Resolved against the config file's folder (not the working directory), so it means the same from any subfolder. */
  out?: string;
  size?: Size;
  format?: ImageFormat;
  /** As written (`#fff`, `transparent`): parsed with the flag's value. */
  bgColor?: string;
  crop?: boolean;
  mask?: boolean;
  alpha?: 'soft' | 'hard';
  refine?: boolean;
  decontaminate?: boolean;
  recursive?: boolean;
  skipExisting?: boolean;
  overwrite?: boolean;
}

const REMOVE_VALIDATORS: { [K in keyof RemoveDefaults]-?: (v: unknown) => NonNullable<RemoveDefaults[K]> } = {
  out: (v) => str('out', v),
  size: (v) => parseEnum('size', SIZES, v, 'api'),
  format: (v) => parseFormat(v, 'api'),
  bgColor: (v) => (parseColor(v, 'api', 'bgColor'), String(v)),
  crop: (v) => bool('crop', v),
  mask: (v) => bool('mask', v),
  alpha: (v) => parseEnum('alpha', ['soft', 'hard'] as const, v, 'api'),
  refine: (v) => bool('refine', v),
  decontaminate: (v) => bool('decontaminate', v),
  recursive: (v) => bool('recursive', v),
  skipExisting: (v) => bool('skipExisting', v),
  overwrite: (v) => bool('overwrite', v),
};

export const REMOVE_DEFAULT_KEYS = Object.freeze(Object.keys(REMOVE_VALIDATORS) as (keyof RemoveDefaults)[]);

/** Flags that commander sets to true when their `--no-` form is absent: given only when false. */
const NEGATABLE: readonly (keyof RemoveDefaults)[] = ['refine', 'decontaminate'];

/**
 * `cutout remove`'s flags with the config file's defaults under them: a flag given wins. The two
 * answers to an existing output (`skipExisting`, `overwrite`) are one choice: a flag of either
 * sets aside the file's; so is the format, which `--out FILE.png` gives by its extension.
 */
export function withRemoveDefaults<F extends { [K in keyof RemoveDefaults]?: unknown }>(flags: F, defaults: Readonly<RemoveDefaults>): F {
  const merged = { ...flags } as Record<string, unknown>;
  const given = (k: keyof RemoveDefaults) => (NEGATABLE.includes(k) ? flags[k] === false : flags[k] !== undefined);
  const flagOutIsFile = typeof flags.out === 'string' && /\.(png|webp|jpe?g)$/i.test(flags.out);
  for (const k of REMOVE_DEFAULT_KEYS) {
    if (given(k) || defaults[k] === undefined) continue;
    if ((k === 'skipExisting' || k === 'overwrite') && (given('skipExisting') || given('overwrite'))) continue;
    if (k === 'format' && flagOutIsFile) continue;
    merged[k] = defaults[k];
  }
  return merged as F;
}

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export type ConfigInput = { [K in keyof CutoutConfig]?: unknown };

const cpuCount = Math.max(1, os.availableParallelism?.() ?? os.cpus().length);
const split = inferenceSplit(cpuCount, os.totalmem());

export const DEFAULTS: Readonly<CutoutConfig> = Object.freeze({
  dataDir: path.join(os.homedir(), '.cutout'),
  model: 'isnet-medium',
  // Two images in flight where there are two cores or more: the worker still runs one inference
  // at a time on every core, and the other image's decode, matte and encode fill the gaps beside
  // it. Measured at int8 (docs/benchmarks.md, "The defaults chosen"): `npm run bench` 4-10 % more images/s
  // on the fixtures; through the CLI within 3 % on small photos, and 3.7-3.9 s against 4.5-4.6 s
  // for three 50 MP photos, peak RSS 930-950 MB against 660-730 MB (under the 1.5 GB budget).
  // (At fp32 1 had measured ahead, and was the default for a while.)
  concurrency: cpuCount > 1 ? 2 * split.workers : 1,
  inferenceWorkers: split.workers,
  inferenceThreads: Number(process.env.CUTOUT_THREADS) > 0 ? Math.floor(Number(process.env.CUTOUT_THREADS)) : split.threads,
  quality: 'best',
  precision: 'auto',
  host: '127.0.0.1',
  port: 8080,
  baseUrl: null,
  workers: Math.max(1, Math.floor(cpuCount / 2)),
  queueLimit: 100,
  syncTimeoutMs: LIMITS.syncTimeoutMs,
  rateLimit: LIMITS.rateLimitPerMinute,
  resultTtlSeconds: LIMITS.resultTtlSeconds,
  callbackBackoffMs: 2000,
  allowPrivateNetwork: false,
  playground: true,
  removebg: true,
  metrics: true,
  metricsPort: null,
  metricsHost: null,
  logLevel: 'info',
  callbackSecret: null,
  marketplaceSecret: null,
  store: null,
  results: null,
  resultsPathStyle: false,
  resultsRedirect: false,
  leaseMs: LIMITS.jobLeaseMs,
  upstream: null,
  upstreamModel: null,
  upstreamToken: null,
  modelServerHost: '127.0.0.1',
  // Triton's HTTP port.
  modelServerPort: 8000,
  modelServerToken: null,
  remove: Object.freeze({}),
});

/** Environment variables of cli-contract.md, mapped to config fields. */
export const ENV_VARS: Readonly<Partial<Record<keyof CutoutConfig, string>>> = Object.freeze({
  dataDir: 'CUTOUT_HOME',
  host: 'CUTOUT_HOST',
  port: 'CUTOUT_PORT',
  baseUrl: 'CUTOUT_BASE_URL',
  callbackSecret: 'CUTOUT_CALLBACK_SECRET',
  marketplaceSecret: 'CUTOUT_MARKETPLACE_SECRET',
  model: 'CUTOUT_MODEL',
  quality: 'CUTOUT_QUALITY',
  logLevel: 'CUTOUT_LOG_LEVEL',
  store: 'CUTOUT_STORE',
  results: 'CUTOUT_RESULTS',
  upstream: 'CUTOUT_UPSTREAM',
  precision: 'CUTOUT_PRECISION',
  upstreamToken: 'CUTOUT_UPSTREAM_TOKEN',
  modelServerHost: 'CUTOUT_MODEL_SERVER_HOST',
  modelServerPort: 'CUTOUT_MODEL_SERVER_PORT',
  modelServerToken: 'CUTOUT_MODEL_SERVER_TOKEN',
});

function fail(field: string, what: string, got: unknown): never {
  throw new CutoutError('invalid_request', `Expected ${what} for ${field} but received ${JSON.stringify(got)}`);
}

function int(field: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) fail(field, `an integer from ${min} to ${max}`, v);
  return n;
}

function bool(field: string, v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === '1') return true;
  if (v === 'false' || v === '0') return false;
  return fail(field, 'true or false', v);
}

function str(field: string, v: unknown): string {
  if (typeof v !== 'string' || v.trim() === '') fail(field, 'a non-empty string', v);
  return v;
}

function nullableStr(field: string, v: unknown): string | null {
  return v === null ? null : str(field, v);
}

const VALIDATORS: { [K in Exclude<keyof CutoutConfig, 'remove'>]: (v: unknown) => CutoutConfig[K] } = {
  dataDir: (v) => path.resolve(expandHome(str('dataDir', v))),
  model: (v) => str('model', v),
  concurrency: (v) => int('concurrency', v, 1, 64),
  inferenceWorkers: (v) => int('inferenceWorkers', v, 1, 64),
  inferenceThreads: (v) => int('inferenceThreads', v, 1, 1024),
  // The API's spelling of the name (`quality`) in the message, as for the other settings.
  quality: (v) => parseEnum('quality', QUALITIES, v, 'api'),
  precision: (v) => parseEnum('precision', PRECISIONS, v, 'api'),
  host: (v) => str('host', v),
  port: (v) => int('port', v, 0, 65535),
  baseUrl: (v) => {
    const s = nullableStr('baseUrl', v);
    if (s !== null && !/^https?:\/\//i.test(s)) fail('baseUrl', 'an http(s) URL', v);
    return s === null ? null : s.replace(/\/+$/, '');
  },
  workers: (v) => int('workers', v, 1, 64),
  queueLimit: (v) => int('queueLimit', v, 0, 1_000_000),
  syncTimeoutMs: (v) => int('syncTimeoutMs', v, 1, 3_600_000),
  rateLimit: (v) => int('rateLimit', v, 1, 1_000_000),
  resultTtlSeconds: (v) => int('resultTtlSeconds', v, 1, 365 * 86400),
  callbackBackoffMs: (v) => int('callbackBackoffMs', v, 1, 3_600_000),
  allowPrivateNetwork: (v) => bool('allowPrivateNetwork', v),
  playground: (v) => bool('playground', v),
  removebg: (v) => bool('removebg', v),
  metrics: (v) => bool('metrics', v),
  metricsPort: (v) => (v === null ? null : int('metricsPort', v, 0, 65535)),
  metricsHost: (v) => nullableStr('metricsHost', v),
  logLevel: (v) => {
    if (typeof v !== 'string' || !(LOG_LEVELS as readonly string[]).includes(v)) fail('logLevel', `one of ${LOG_LEVELS.join(', ')}`, v);
    return v as LogLevel;
  },
  callbackSecret: (v) => nullableStr('callbackSecret', v),
  marketplaceSecret: (v) => nullableStr('marketplaceSecret', v),
  store: (v) => {
    const s = nullableStr('store', v);
    // The value may hold a password: it is not repeated in the message.
    if (s !== null && !/^postgres(ql)?:\/\/\S+$/i.test(s)) fail('store', 'a postgres:// or postgresql:// URL', redactUrl(s));
    return s;
  },
  results: (v) => {
    const s = nullableStr('results', v);
    if (s !== null && !/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/\S*)?$/i.test(s)) fail('results', 's3://BUCKET[/PREFIX]', s);
    return s;
  },
  resultsPathStyle: (v) => bool('resultsPathStyle', v),
  resultsRedirect: (v) => bool('resultsRedirect', v),
  leaseMs: (v) => int('leaseMs', v, LIMITS.minJobLeaseMs, LIMITS.maxJobLeaseMs),
  upstream: (v) => {
    const s = nullableStr('upstream', v);
    if (s !== null && !/^https?:\/\/[^/]/i.test(s)) fail('upstream', 'an http(s) URL', v);
    return s === null ? null : s.replace(/\/+$/, '');
  },
  upstreamModel: (v) => nullableStr('upstreamModel', v),
  // A secret: never repeated in a message.
  upstreamToken: (v) => token('upstreamToken', v),
  modelServerHost: (v) => str('modelServerHost', v),
  modelServerPort: (v) => int('modelServerPort', v, 0, 65535),
  modelServerToken: (v) => token('modelServerToken', v),
};

/** A bearer token: printable ASCII without spaces (it travels in an HTTP header), or null. */
function token(field: string, v: unknown): string | null {
  if (v === null) return null;
  if (typeof v !== 'string' || !/^[\x21-\x7e]{1,4096}$/.test(v)) {
    throw new CutoutError('invalid_request', `Expected a token of printable ASCII characters without spaces for ${field}`);
  }
  return v;
}

function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? path.join(os.homedir(), p.slice(1)) : p;
}

/**
 * Reads the config file: the one given, else the first that cosmiconfig finds from the cwd up to
 * the home directory, then in the user's global config directory (~/.config/cutout/config). Its
 * default since version 9 looks in the cwd only, which misses a project's file from a subfolder.
 */
async function readConfigFile(configFile?: string): Promise<{ config: Record<string, unknown>; filepath: string } | null> {
  const { cosmiconfig } = requireCjs('cosmiconfig') as typeof import('cosmiconfig');
  const explorer = cosmiconfig('cutout', { searchStrategy: 'global' });
  try {
    const found = configFile ? await explorer.load(path.resolve(configFile)) : await explorer.search();
    if (!found || found.isEmpty) return null;
    if (typeof found.config !== 'object' || found.config === null || Array.isArray(found.config)) {
      throw new CutoutError('invalid_request', `Config file ${found.filepath} must hold an object`);
    }
    return { config: found.config as Record<string, unknown>, filepath: found.filepath };
  } catch (err) {
    if (err instanceof CutoutError) throw err;
    // A folder on the search path that this user may not read (a HOME of another user) holds no
    // config for them: the search goes on without it, as git does. A file given is another matter.
    if (!configFile && isPermissionError(err)) return null;
    const filepath = configFile ?? (err as { filepath?: string }).filepath;
    throw new CutoutError('invalid_request', `Cannot read config file${filepath ? ' ' + filepath : ''}: ${parseErrorReason(err, filepath)}`);
  }
}

/**
 * What a config file's parse error says, in one line, with where: `Expected double-quoted property
 * name at line 3, column 1 (a trailing comma before it?)`. cosmiconfig's JSON errors carry a
 * header ("JSON Error in <file>:"), a code frame and the offset ("at position 23"), from which the
 * line and column are counted in the file; YAML's (`.cutoutrc`) carry a mark.
 */
function parseErrorReason(err: unknown, filepath: string | undefined): string {
  const e = err as { name?: string; message?: unknown; reason?: string; mark?: { line: number; column: number } };
  if (e.name === 'YAMLException' && e.reason && e.mark) return `${e.reason} at line ${e.mark.line + 1}, column ${e.mark.column + 1}`;
  // One line: the first after a header that ends in ':', without the code frame.
  const lines = String(e.message).split('\n').map((l) => l.trim()).filter((l) => l && !/^(>?\s*\d+\s*\||\|)/.test(l));
  let reason = lines[0]?.endsWith(':') && lines[1] ? lines[1] : (lines[0] ?? 'unknown error');
  if (e.name !== 'JSONError' || !filepath) return reason;
  let text: string;
  try {
    text = fs.readFileSync(filepath, 'utf8');
  } catch {
    return reason;
  }
  const position = /at position (\d+)/.exec(reason);
  const offset = position ? Number(position[1]) : /end of JSON input/.test(reason) ? text.length : null;
  reason = reason.replace(/ in JSON at position \d+.*$| while parsing .*$/, '');
  if (offset === null || offset > text.length) return reason;
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  const trailingComma = /,\s*$/.test(before) && /^[\]}]/.test(text.slice(offset)) ? ' (a trailing comma before it?)' : '';
  return `${reason} at line ${line}, column ${column}${trailingComma}`;
}

/**
 * Resolves the configuration from flags, environment and file. Unknown keys in the file are an
 * error (a typo must not be silently ignored). The result is frozen.
 */
export async function loadConfig(
  flags: ConfigInput = {},
  options: { configFile?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<Readonly<CutoutConfig>> {
  const env = options.env ?? process.env;
  const file = await readConfigFile(options.configFile);
  const merged: Record<string, unknown> = { ...DEFAULTS };
  const remove: Record<string, unknown> = {};
  if (file) {
    for (const [k, v] of Object.entries(file.config)) {
      if (k in REMOVE_VALIDATORS) {
        try {
          remove[k] = REMOVE_VALIDATORS[k as keyof RemoveDefaults](v);
        } catch (err) {
          throw new CutoutError('invalid_request', `${(err as Error).message} in ${file.filepath}`);
        }
        if (k === 'out' && v !== '-') remove[k] = path.resolve(path.dirname(file.filepath), expandHome(v as string));
        continue;
      }
      if (!(k in VALIDATORS) || k === 'remove') {
        const known = [...Object.keys(VALIDATORS), ...REMOVE_DEFAULT_KEYS].join(', ');
        throw new CutoutError('invalid_request', `Unknown setting "${k}" in ${file.filepath}; known: ${known}`);
      }
      merged[k] = v;
    }
    if (remove.skipExisting && remove.overwrite) {
      throw new CutoutError('invalid_request', `skipExisting and overwrite cannot both be true in ${file.filepath}`);
    }
  }
  for (const [k, name] of Object.entries(ENV_VARS)) {
    const v = env[name as string];
    if (v !== undefined && v !== '') merged[k] = v;
  }
  for (const [k, v] of Object.entries(flags)) if (v !== undefined) merged[k] = v;
  const out = {} as Record<string, unknown>;
  for (const [k, validate] of Object.entries(VALIDATORS)) out[k] = (validate as (v: unknown) => unknown)(merged[k]);
  out.remove = Object.freeze(remove);
  return Object.freeze(out as unknown as CutoutConfig);
}
