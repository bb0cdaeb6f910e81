/**
 * The settings table as Markdown, for docs/deploy.md "Settings": written from the settings table
 * (settings.ts) by `npm run docs:settings` between the markers below, so that the docs cannot
 * drift from the flags and variables (test/settings.test.ts compares them).
 */
import { COMMANDS, SETTINGS, type SettingRow } from './settings.js';

export const TABLE_START = '<!-- settings: written from src/settings.ts by `npm run docs:settings`; do not edit -->';
export const TABLE_END = '<!-- /settings -->';

const cell = (s: string) => s.replace(/\|/g, '\\|');

function defaultOf(row: SettingRow): string {
  if (row.defaultText) return row.defaultText;
  return row.default === null ? 'unset' : String(row.default);
}

/** A row's flags: `serve --host <host>` for one command, `--model <name|file>` (remove, serve, model-server) for several. */
function flagsText(row: SettingRow): string {
  const byFlag = new Map<string, string[]>();
  for (const [command, flag] of Object.entries(row.flags)) if (flag) byFlag.set(flag, [...(byFlag.get(flag) ?? []), command]);
  return [...byFlag].map(([flag, commands]) => {
    if (commands.length === 1) return `\`${commands[0]} ${flag}\``;
    return `\`${flag}\` (${commands.length === COMMANDS.length ? 'every command' : commands.join(', ')})`;
  }).join(', ');
}

/** One line per setting that has a variable: variable, `_FILE`, flags, default, meaning. */
export function settingsMarkdown(rows: readonly SettingRow[] = SETTINGS as readonly SettingRow[]): string {
  const lines = ['| variable | from a file | flag | default | meaning |', '|---|---|---|---|---|'];
  for (const row of rows) {
    if (!row.env) continue;
    const flags = flagsText(row) || (row.scope === 'process' ? '(environment only)' : '(environment or config file only)');
    lines.push(`| \`${row.env}\` | ${row.secret ? `\`${row.env}_FILE\`` : ''} | ${cell(flags)} | ${cell(defaultOf(row))} | ${cell(row.help)} |`);
  }
  return lines.join('\n');
}

/** The document with its table between the markers rewritten; throws when the markers are missing. */
export function withSettingsTable(doc: string, table: string): string {
  const start = doc.indexOf(TABLE_START);
  const end = doc.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`docs/deploy.md has no settings table markers (${TABLE_START} ... ${TABLE_END})`);
  return doc.slice(0, start + TABLE_START.length) + '\n' + table + '\n' + doc.slice(end);
}
