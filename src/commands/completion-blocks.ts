/**
 * The image flags' part of the shell completion scripts, written from the options table
 * (src/options.ts). The scripts in `completions/` are written by hand, one idiomatic file per shell,
 * except for one block in each, between the markers below, that `npm run completions` rewrites from
 * the table (scripts/completions.mjs); test/completion.test.ts fails when a block is stale. So a new
 * image option reaches the completions without editing them by hand.
 */
import { OPTION_TABLE, type OptionRow } from '../options.js';
import type { Shell } from './completion.js';

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
