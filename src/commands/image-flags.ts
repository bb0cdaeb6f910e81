/**
 * The CLI's image flags, read off the options table (src/options.ts): their registration on a
 * command and their parsing into the one request type, with the CLI's defaults. A bad value is a
 * usage error naming the flag (`--bg-color`), never the config key.
 */
import type { Command } from 'commander';
import { CLI_DEFAULTS, OPTION_TABLE, type Format, type ImageOptions, type OptionRow } from '../options.js';

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
  return out as unknown as ImageOptions;
}
