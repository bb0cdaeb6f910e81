/**
 * The CLI's image flags, read off the options table (src/options.ts): their registration on a
 * command and their parsing into the one request type, with the CLI's defaults. A bad value is a
 * usage error naming the flag (`--bg-color`), never the config key.
 */
import fs from 'node:fs';
import type { Command } from 'commander';
import { checkImageOptions, CLI_DEFAULTS, OPTION_TABLE, SHADOWS, type Format, type ImageOptions, type OptionRow } from '../options.js';

/** The table's rows that have a CLI flag, in table order. */
const FLAG_ROWS: readonly OptionRow[] = OPTION_TABLE.filter((r) => r.flag !== null);

/** Adds the image flags of the table to `command` (`--size`, `--bg-color`, `--no-refine`, ...). */
export function registerImageFlags(command: Command): Command {
  for (const r of FLAG_ROWS) command.option(r.flag!, r.help);
  return command;
}

/** The name a row's value is reported under: its API parameter, shown by the parsers as `--flag`. */
function paramOf(r: OptionRow): string {
  return r.api ?? r.key;
}

/**
 * Checks the flags whose default comes from the config (`--quality`, `--precision`) before the
 * config is read, so that a bad value names the flag rather than the config key.
 */
export function checkConfigFlags(flags: Readonly<Record<string, unknown>>): void {
  for (const r of FLAG_ROWS) if (r.cliConfig && flags[r.key] !== undefined) r.parse(flags[r.key], paramOf(r), 'cli');
}

/**
 * The request the flags ask for, over the CLI's defaults: the config's `quality` and `precision`
 * (already merged with their flags by loadConfig), and `format` from the extension of `--out FILE`.
 */
export function imageOptionsFromFlags(
  flags: Readonly<Record<string, unknown>>,
  base: { quality?: ImageOptions['quality']; precision?: ImageOptions['precision']; format?: ImageOptions['format'] },
): ImageOptions {
  const out: Record<string, unknown> = { ...CLI_DEFAULTS, format: base.format ?? CLI_DEFAULTS.format };
  for (const r of FLAG_ROWS) {
    const value = r.cliConfig ? base[r.cliConfig] : flags[r.key];
    if (value !== undefined) out[r.key] = r.parse(value, paramOf(r), 'cli');
  }
  if (flags.format === undefined && base.format === undefined) out.formatByDefault = true;
  // Combinations (a canvas with remove.bg's crop, ...) are usage errors before any photo is read.
  return checkImageOptions(out as unknown as ImageOptions, 'cli');
}

/**
 * `--shadow` was a switch before it took a mode (issue 54), and a switch is what remove.bg's users
 * type: `cutout --shadow photo.jpg` must still cut out photo.jpg (now with the float shadow a bare
 * `--shadow` draws), where commander would take `photo.jpg` for the mode. So the word after
 * `--shadow` is left to be an input when it is no mode and looks like one: a file or folder that
 * is there, a path or glob (`.`, `/`, `*`, `?`), or `-` (stdin). A mistyped mode (`--shadow soft`)
 * stays the flag's value, a usage error naming it. After `--`, nothing is rewritten.
 */
export function shadowAsSwitch(argv: readonly string[], exists: (p: string) => boolean = fs.existsSync): string[] {
  const modes = new Set<string>([...SHADOWS, 'true', 'false']);
  const end = argv.indexOf('--');
  const looksLikeInput = (word: string) => word === '-' || (!word.startsWith('-') && !modes.has(word.trim().toLowerCase()) && (/[./\\*?]/.test(word) || exists(word)));
  return argv.map((arg, i) => {
    const next = argv[i + 1];
    const asSwitch = arg === '--shadow' && (end === -1 || i < end) && next !== undefined && looksLikeInput(next);
    return asSwitch ? '--shadow=float' : arg;
  });
}
