// `npm run docs:settings`: rewrites the settings table of docs/deploy.md (between its markers) from
// the settings table (src/settings.ts, built into dist/); test/settings.test.ts fails when it is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { settingsMarkdown, withSettingsTable } from '../dist/settings-doc.js';

const file = new URL('../docs/deploy.md', import.meta.url);
const before = readFileSync(file, 'utf8');
const after = withSettingsTable(before, settingsMarkdown());
if (after !== before) writeFileSync(file, after);
process.stdout.write(`docs/deploy.md: settings table ${after === before ? 'up to date' : 'rewritten'}\n`);
