/**
 * Configuration, resolved once: command-line flag > environment variable > config file (found by
 * cosmiconfig under the module name `cutout`, or given with --config) > built-in default.
 * Validated here, then frozen; nothing else reads process.env for settings.
 */
import fs from 'node:fs';
import path from 'node:path';
import { requireCjs } from './cjs.js';
import { CutoutError, isPermissionError } from './errors.js';
import { expandHome, FILE_KEYS, LOG_LEVELS, rowsOf, type LogLevel, type RemoveDefaults, type SettingRow, type Settings } from './settings.js';

export { LOG_LEVELS, type LogLevel };

/**
 * The resolved settings: one field per `config` row of the settings table (settings.ts), typed by
 * what its parser returns, so that a new setting is one row there; and `remove`, the config file's
 * defaults of `cutout remove`'s flags (the `remove` rows).
 */
export interface CutoutConfig extends Settings {
  /** `cutout remove`'s output defaults from the config file (REMOVE_DEFAULT_KEYS); its flags override them. */
  remove: Readonly<RemoveDefaults>;
}

export type { RemoveDefaults };

const REMOVE_ROWS = rowsOf('remove');
const REMOVE_VALIDATORS: ReadonlyMap<string, (v: unknown) => unknown> = new Map(REMOVE_ROWS.map((r) => [r.key, r.parse]));

/** The `cutout remove` flags a project may set in its config file (the `remove` rows of the settings table). */
export const REMOVE_DEFAULT_KEYS = Object.freeze(REMOVE_ROWS.map((r) => r.key) as (keyof RemoveDefaults)[]);

/** Flags that commander sets to true when their `--no-` form is absent: given only when false. */
const NEGATABLE: readonly (keyof RemoveDefaults)[] = ['refine', 'decontaminate'];

/**
 * `cutout remove`'s flags with the config file's defaults under them: a flag given wins. The two
 * answers to an existing output (`skipExisting`, `overwrite`) are one choice: a flag of either
 * sets aside the file's; so is the format, which `--out FILE.png` gives by its extension.
 */
export function withRemoveDefaults<F extends { [K in keyof RemoveDefaults]?: unknown }>(flags: F, defaults: Readonly<RemoveDefaults>): F & RemoveDefaults {
  const merged = { ...flags } as Record<string, unknown>;
  const given = (k: keyof RemoveDefaults) => (NEGATABLE.includes(k) ? flags[k] === false : flags[k] !== undefined);
  const flagOutIsFile = typeof flags.out === 'string' && /\.(png|webp|jpe?g)$/i.test(flags.out);
  for (const k of REMOVE_DEFAULT_KEYS) {
    if (given(k) || defaults[k] === undefined) continue;
    if ((k === 'skipExisting' || k === 'overwrite') && (given('skipExisting') || given('overwrite'))) continue;
    if (k === 'format' && flagOutIsFile) continue;
    merged[k] = defaults[k];
  }
  return merged as F & RemoveDefaults;
}

export type ConfigInput = { [K in keyof CutoutConfig]?: unknown };

// Every field of CutoutConfig but `remove` is a `config` row, and every such row a field (the type is made from the rows).
const ROWS: readonly SettingRow[] = rowsOf('config');
const VALIDATORS = Object.fromEntries(ROWS.map((r) => [r.key, r.parse])) as { [K in keyof Settings]: (v: unknown) => Settings[K] };

export const DEFAULTS: Readonly<CutoutConfig> = Object.freeze({
  ...(Object.fromEntries(ROWS.map((r) => [r.key, r.default])) as Settings),
  remove: Object.freeze({}),
});

/** Environment variables of cli-contract.md, mapped to config fields (from the settings table). */
export const ENV_VARS: Readonly<Partial<Record<keyof CutoutConfig, string>>> = Object.freeze(
  Object.fromEntries(ROWS.filter((r) => r.env).map((r) => [r.key, r.env as string])),
);

/**
 * A setting's value from the environment: the variable, else for a secret the file its `_FILE`
 * variable names (Docker and Kubernetes secrets), read once, its trailing newline dropped. Both
 * set is an error: which one wins would be a guess.
 */
function fromEnvironment(row: (typeof ROWS)[number], env: NodeJS.ProcessEnv): string | undefined {
  if (!row.env) return undefined;
  const direct = env[row.env];
  const file = row.secret ? env[`${row.env}_FILE`] : undefined;
  if (direct !== undefined && direct !== '' && file) {
    throw new CutoutError('invalid_request', `Both ${row.env} and ${row.env}_FILE are set; set one`);
  }
  if (!file) return direct === '' ? undefined : direct;
  try {
    return fs.readFileSync(file, 'utf8').replace(/\r?\n$/, '');
  } catch (err) {
    throw new CutoutError('invalid_request', `Cannot read ${row.env}_FILE ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
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
  const fromEnv = new Map<string, string>();
  for (const row of ROWS) {
    const v = fromEnvironment(row, env);
    if (v !== undefined) fromEnv.set(row.key, v);
  }
  // The file's own path comes before the file: a flag, else CUTOUT_CONFIG.
  const configFile = options.configFile ?? (typeof flags.configFile === 'string' ? flags.configFile : fromEnv.get('configFile'));
  const file = await readConfigFile(configFile);
  const merged: Record<string, unknown> = { ...DEFAULTS, configFile: configFile ?? null };
  const remove = file ? fileSettings(file, merged) : {};
  for (const [k, v] of fromEnv) merged[k] = v;
  for (const [k, v] of Object.entries(flags)) if (v !== undefined) merged[k] = v;
  const out = {} as Record<string, unknown>;
  for (const [k, validate] of Object.entries(VALIDATORS)) out[k] = (validate as (v: unknown) => unknown)(merged[k]);
  out.remove = Object.freeze(remove);
  return Object.freeze(out as unknown as CutoutConfig);
}

/**
 * The config file's settings into `merged`; returns its `cutout remove` defaults. Unknown keys are
 * an error (a typo must not be silently ignored), and so is the file's own path.
 */
function fileSettings(file: { config: Record<string, unknown>; filepath: string }, merged: Record<string, unknown>): Record<string, unknown> {
  const remove: Record<string, unknown> = {};
  const inFile = new Set(FILE_KEYS);
  for (const [k, v] of Object.entries(file.config)) {
    const removeDefault = REMOVE_VALIDATORS.get(k);
    if (removeDefault) {
      try {
        remove[k] = removeDefault(v);
      } catch (err) {
        throw new CutoutError('invalid_request', `${(err as Error).message} in ${file.filepath}`);
      }
      if (k === 'out' && v !== '-') remove[k] = path.resolve(path.dirname(file.filepath), expandHome(v as string));
      continue;
    }
    if (!inFile.has(k)) {
      const known = FILE_KEYS.join(', ');
      throw new CutoutError('invalid_request', `Unknown setting "${k}" in ${file.filepath}; known: ${known}`);
    }
    merged[k] = v;
  }
  if (remove.skipExisting && remove.overwrite) {
    throw new CutoutError('invalid_request', `skipExisting and overwrite cannot both be true in ${file.filepath}`);
  }
  return remove;
}
