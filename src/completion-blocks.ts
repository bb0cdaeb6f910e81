/**
 * The generated parts of the shell completion scripts. The scripts in `completions/` are written
 * by hand, one idiomatic file per shell, except for two blocks in each, between markers, that
 * `npm run completions` rewrites (scripts/completions.mjs): the image flags, from the options table
 * (src/options.ts), and every command's flags, from the program, whose flags come from the settings
 * table (src/settings.ts) and each command's own (`--json`, `--key`).
 * test/e2e/completion.test.ts fails when a block is stale or a flag of a command is missing from
 * that command's completion. So a new setting or image option reaches the completions without
 * editing them by hand.
 */
import type { Command } from 'commander';
import { OPTION_TABLE, type OptionRow } from './options.js';
import { buildProgram } from './program.js';
import { SETTINGS, type SettingRow } from './settings.js';
import type { Shell } from './commands/completion.js';

export const BLOCK_START = '>>> image flags: written from the options table (src/options.ts) by `npm run completions`; do not edit';
export const BLOCK_END = '<<< image flags';

interface FlagCompletion {
  /** `--bg-color` */
  long: string;
  /** The value's name (`color` from `--bg-color <color>`), or null for a switch. */
  valueName: string | null;
  summary: string;
  values?: readonly string[] | 'file';
}

/** The table's flags with what completes them, in table order. */
export function imageFlags(table: readonly OptionRow[] = OPTION_TABLE): FlagCompletion[] {
  return table.flatMap((r) => {
    if (r.flag === null || r.completion === null) return [];
    const [long, value] = r.flag.split(' ');
    return [{ long, valueName: value ? value.replace(/[<>]/g, '').replace(/\|/g, ' or ') : null, summary: r.completion.summary, values: r.completion.values }];
  });
}

const singleQuoted = (s: string) => `'${s.replace(/'/g, `'"'"'`)}'`;
const capitalized = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
const wordList = (values: readonly string[]) => values.join(' ');

function bashBlock(flags: FlagCompletion[]): string[] {
  const valued = flags.filter((f) => f.valueName !== null);
  return [
    '# The image flags, and those of them that take a value (the word after them is neither a command nor an input)',
    `_cutout_image_opts=${singleQuoted(flags.map((f) => f.long).join(' '))}`,
    `_cutout_image_value_opts=${singleQuoted(` ${valued.map((f) => f.long).join(' ')} `)}`,
    '',
    '# Completes the value of the image flag $1 (uses $cur); returns 1 when $1 is not an image flag that takes a value',
    '_cutout_image_value() {',
    '    case $1 in',
    ...valued.map((f) => {
      if (f.values === 'file') return `        ${f.long}) _cutout_compgen_files file ;;`;
      if (f.values) return `        ${f.long}) COMPREPLY=($(compgen -W ${singleQuoted(wordList(f.values))} -- "$cur")) ;;`;
      return `        ${f.long}) ;;`;
    }),
    '        *) return 1 ;;',
    '    esac',
    '}',
  ];
}

function zshBlock(flags: FlagCompletion[]): string[] {
  const spec = (f: FlagCompletion): string => {
    // zsh's _arguments spec: --flag=[description]:name:action, brackets escaped in the description
    const description = f.summary.replace(/([[\]])/g, '\\$1');
    if (f.valueName === null) return singleQuoted(`${f.long}[${description}]`);
    const action = f.values === 'file' ? '_files' : f.values ? `(${wordList(f.values)})` : ' ';
    return singleQuoted(`${f.long}=[${description}]:${f.valueName}:${action}`);
  };
  return ['_cutout_image_opts=(', ...flags.map((f) => `  ${spec(f)}`), ')'];
}

function fishBlock(flags: FlagCompletion[]): string[] {
  const quoted = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  return [
    '# The image flags that take a value, skipped by __cutout_command',
    `set -g __cutout_image_value_opts ${flags.filter((f) => f.valueName !== null).map((f) => f.long).join(' ')}`,
    ...flags.map((f) => {
      const parts = ['complete -c cutout -n __cutout_removing', `-l ${f.long.slice(2)}`];
      if (f.valueName !== null) parts.push(f.values === 'file' ? '-r -F' : '-x');
      if (Array.isArray(f.values)) parts.push(`-a ${quoted(wordList(f.values))}`);
      parts.push(`-d ${quoted(capitalized(f.summary))}`);
      return parts.join(' ');
    }),
  ];
}

/** The block of one shell, markers included, as lines. */
export function imageFlagBlock(shell: Shell, table: readonly OptionRow[] = OPTION_TABLE): string[] {
  const flags = imageFlags(table);
  const body = shell === 'bash' ? bashBlock(flags) : shell === 'zsh' ? zshBlock(flags) : fishBlock(flags);
  return [`# ${BLOCK_START}`, ...body, `# ${BLOCK_END}`];
}

/** The script with its block rewritten from the table; throws when the markers are missing. */
export function withImageFlags(script: string, shell: Shell, table: readonly OptionRow[] = OPTION_TABLE): string {
  const lines = script.split('\n');
  const start = lines.indexOf(`# ${BLOCK_START}`);
  const end = lines.indexOf(`# ${BLOCK_END}`);
  if (start < 0 || end < start) throw new Error(`the ${shell} completion script has no image-flag block (# ${BLOCK_START} ... # ${BLOCK_END})`);
  return [...lines.slice(0, start), ...imageFlagBlock(shell, table), ...lines.slice(end + 1)].join('\n');
}

// ---------------------------------------------------------------------------------------------
// The commands' flags: a second block in each script, written from the program's commands, whose
// flags come from the settings table (src/settings.ts, setting-flags.ts), the options table (the
// image flags above, left out here) and each command's own per-call flags (`--json`, `--key`).

export const COMMANDS_START = '>>> command flags: written from the settings table and the commands (src/settings.ts, src/commands/) by `npm run completions`; do not edit';
export const COMMANDS_END = '<<< command flags';

/** What completes a flag's value. */
export type ValueKind = readonly string[] | 'file' | 'directory' | 'host' | 'url' | 'free';

export interface CommandFlag {
  /** `--out` */
  long: string;
  /** `-o`, or null */
  short: string | null;
  /** null for a switch */
  value: ValueKind | null;
  /** The value's name (`path` from `--out <path>`), or null for a switch. */
  valueName: string | null;
  summary: string;
  repeatable: boolean;
}

/** A command (`serve`) or a subcommand (`keys create`) and its flags, `--help` aside. */
export interface CommandFlags {
  path: string[];
  flags: CommandFlag[];
}

/** What completes a flag's value: the values of its setting row, else what its value's name says. */
function valueKind(long: string, valueName: string): ValueKind {
  const row = (SETTINGS as readonly SettingRow[]).find((r) => Object.values(r.flags).some((f) => f?.split(/[ ,]+/).includes(long)));
  if (row?.values) return row.values;
  if (valueName === 'dir') return 'directory';
  if (/(^|\|)(file|path)$/.test(valueName)) return 'file';
  if (valueName === 'host') return 'host';
  if (valueName === 'url') return 'url';
  return 'free';
}

/** The help's first clause, without its variable and default: `data directory`. */
function summaryOf(description: string): string {
  const clause = description.replace(/ \((env|default)\b[^)]*\)/g, '').split('; ')[0].trim();
  return clause.length > 70 && clause.includes(' (') ? clause.slice(0, clause.indexOf(' (')) : clause;
}

/** Every command and subcommand of the program with its flags, remove's image flags aside (their own block). */
export function commandFlags(program: Command = buildProgram()): CommandFlags[] {
  const image = new Set(imageFlags().map((f) => f.long));
  const flagsOf = (c: Command, skipImage: boolean): CommandFlag[] =>
    c.options.flatMap((o) => {
      if (!o.long || (skipImage && image.has(o.long))) return [];
      const valueName = /<([^>]+)>/.exec(o.flags)?.[1] ?? null;
      return [{ long: o.long, short: o.short ?? null, value: valueName === null ? null : valueKind(o.long, valueName), valueName, summary: summaryOf(o.description), repeatable: /\(repeatable\)/.test(o.description) }];
    });
  return program.commands.flatMap((c) =>
    c.commands.length
      ? c.commands.map((sub) => ({ path: [c.name(), sub.name()], flags: flagsOf(sub, false) }))
      : [{ path: [c.name()], flags: flagsOf(c, c.name() === 'remove') }],
  );
}

/** The shell variable of a command's flags: `_cutout_opts_keys_create`, `_cutout_opts_model_server`. */
export const optsVariable = (path: string[]) => `_cutout_opts_${path.join('_').replace(/-/g, '_')}`;

/** Each flag that takes a value, once, with what completes it (the first command's, in program order). */
function valuedFlags(commands: CommandFlags[]): CommandFlag[] {
  const seen = new Map<string, CommandFlag>();
  for (const c of commands) for (const f of c.flags) if (f.value !== null && !seen.has(f.long)) seen.set(f.long, f);
  return [...seen.values()];
}

const names = (f: CommandFlag) => (f.short ? [f.short, f.long] : [f.long]);

function bashCommandBlock(commands: CommandFlags[]): string[] {
  const valued = valuedFlags(commands);
  const byAction = new Map<string, string[]>();
  for (const f of valued) {
    const v = f.value!;
    const action = Array.isArray(v) ? `COMPREPLY=($(compgen -W ${singleQuoted(wordList(v))} -- "$cur"))` : v === 'file' || v === 'directory' ? `_cutout_compgen_files ${v}` : v === 'host' ? 'COMPREPLY=($(compgen -A hostname -- "$cur"))' : '';
    byAction.set(action, [...(byAction.get(action) ?? []), ...names(f)]);
  }
  return [
    "# Each command's flags (remove's besides the image flags)",
    ...commands.map((c) => `${optsVariable(c.path)}=${singleQuoted(c.flags.flatMap(names).join(' '))}`),
    '# The flags that take a value (the word after them is neither a command nor an input)',
    `_cutout_value_opts=${singleQuoted(` ${valued.flatMap(names).join(' ')} `)}`,
    '',
    '# Completes the value of the flag $1 (uses $cur); returns 1 when $1 takes no value',
    '_cutout_flag_value() {',
    '    case $1 in',
    ...[...byAction].map(([action, flags]) => `        ${flags.join(' | ')}) ${action ? `${action} ` : ''};;`),
    '        *) return 1 ;;',
    '    esac',
    '}',
  ];
}

function zshAction(f: CommandFlag): string {
  const v = f.value!;
  if (Array.isArray(v)) return `(${wordList(v)})`;
  return v === 'file' ? '_files' : v === 'directory' ? '_directories' : v === 'host' ? '_hosts' : v === 'url' ? '_urls' : ' ';
}

function zshCommandBlock(commands: CommandFlags[]): string[] {
  const spec = (f: CommandFlag): string => {
    const description = f.summary.replace(/([[\]\\])/g, '\\$1');
    const tail = f.value === null ? `[${description}]` : `[${description}]:${f.valueName!.replace(/[|:]/g, ' or ')}:${zshAction(f)}`;
    const repeat = f.repeatable ? '*' : '';
    if (!f.short) return singleQuoted(`${repeat}${f.long}${f.value === null ? '' : '='}${tail}`);
    // `-o, --out <path>`: either spelling, once
    const short = `${f.short}${f.value === null ? '' : '+'}`;
    const long = `${f.long}${f.value === null ? '' : '='}`;
    return `${singleQuoted(`(${f.short} ${f.long})`)}{${short},${long}}${singleQuoted(tail)}`;
  };
  return commands.flatMap((c) => [`${optsVariable(c.path)}=(`, ...c.flags.map((f) => `  ${spec(f)}`), ')']);
}

function fishCommandBlock(commands: CommandFlags[]): string[] {
  const quoted = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const condition = (path: string[]) =>
    path[0] === 'remove' ? '__cutout_removing' : path.length === 1 ? quoted(`__cutout_is ${path[0]}`) : quoted(`__cutout_is ${path[0]}; and __fish_seen_subcommand_from ${path[1]}`);
  return [
    '# The flags that take a value, skipped by __cutout_command',
    `set -g __cutout_value_opts ${valuedFlags(commands).flatMap(names).join(' ')}`,
    ...commands.flatMap((c) =>
      c.flags.map((f) => {
        const parts = [`complete -c cutout -n ${condition(c.path)}`];
        if (f.short) parts.push(`-s ${f.short.slice(1)}`);
        parts.push(`-l ${f.long.slice(2)}`);
        const v = f.value;
        if (v === 'file') parts.push('-r -F');
        else if (v === 'directory') parts.push("-x -a '(__fish_complete_directories)'");
        else if (v === 'host') parts.push("-x -a '(__fish_print_hostnames)'");
        else if (Array.isArray(v)) parts.push(`-x -a ${quoted(wordList(v))}`);
        else if (v !== null) parts.push('-x');
        parts.push(`-d ${quoted(capitalized(f.summary))}`);
        return parts.join(' ');
      }),
    ),
  ];
}

/** The command-flag block of one shell, markers included, as lines. */
export function commandFlagBlock(shell: Shell, commands: CommandFlags[] = commandFlags()): string[] {
  const body = shell === 'bash' ? bashCommandBlock(commands) : shell === 'zsh' ? zshCommandBlock(commands) : fishCommandBlock(commands);
  return [`# ${COMMANDS_START}`, ...body, `# ${COMMANDS_END}`];
}

/** The script with its command-flag block rewritten; throws when the markers are missing. */
export function withCommandFlags(script: string, shell: Shell, commands: CommandFlags[] = commandFlags()): string {
  const lines = script.split('\n');
  const start = lines.indexOf(`# ${COMMANDS_START}`);
  const end = lines.indexOf(`# ${COMMANDS_END}`);
  if (start < 0 || end < start) throw new Error(`the ${shell} completion script has no command-flag block (# ${COMMANDS_START} ... # ${COMMANDS_END})`);
  return [...lines.slice(0, start), ...commandFlagBlock(shell, commands), ...lines.slice(end + 1)].join('\n');
}

/** Both generated blocks of a script rewritten: what `npm run completions` writes. */
export function withGeneratedBlocks(script: string, shell: Shell): string {
  return withCommandFlags(withImageFlags(script, shell), shell);
}
