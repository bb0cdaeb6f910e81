/**
 * Every command's setting flags, from the settings table (src/settings.ts): their registration on
 * a command and their values as config fields for loadConfig. A command registers its rows here
 * (`--data`, `--config`, `--store`, `--model`, ...) and its own per-call flags (`--json`, `--key`)
 * itself; the image flags of `remove` come from the options table (image-flags.ts).
 */
import type { Command } from 'commander';
import type { ConfigInput } from '../config.js';
import { flagAttribute, settingHelp, settingsOf, type CommandName } from '../settings.js';

/**
 * Adds a command's flags from the settings table: all of them in table order, or those of `keys`
 * in that order (where the command's --help interleaves them with flags of its own).
 */
export function addSettingFlags(command: Command, which: CommandName, keys?: readonly string[]): Command {
  const rows = settingsOf(which);
  const chosen = keys ? keys.map((k) => rows.find((r) => r.key === k) ?? missing(which, k)) : rows;
  for (const row of chosen) command.option(row.flag, settingHelp(row, which));
  return command;
}

function missing(which: CommandName, key: string): never {
  throw new Error(`the settings table gives ${which} no flag for ${key}`);
}

/**
 * The setting flags given on the command line, as config fields (the `config` rows; `remove`'s
 * output defaults are merged by withRemoveDefaults). With the command, only flags whose value came
 * from the command line: commander fills `--no-playground` with a default `true`, which must not
 * override an environment variable or the config file. Without it (`runRemove` called with flags),
 * every value that is set.
 */
export function flagsGiven(command: Command | null, flags: Readonly<Record<string, unknown>>, which: CommandName = 'serve'): ConfigInput {
  const out: Record<string, unknown> = {};
  for (const row of settingsOf(which)) {
    if (row.scope !== 'config') continue;
    const attribute = flagAttribute(row.flag);
    if (command && command.getOptionValueSource(attribute) !== 'cli') continue;
    if (flags[attribute] !== undefined) out[row.key] = flags[attribute];
  }
  return out as ConfigInput;
}
