// `npm run completions`: rewrites the two generated blocks of each script in completions/: the image
// flags from the options table, and every command's flags from the program, whose flags come from the
// settings table and the commands (src/completion-blocks.ts says why); the rest of each
// script is written by hand.
import { readFileSync, writeFileSync } from 'node:fs';
import { SHELLS } from '../dist/commands/completion.js';
import { withGeneratedBlocks } from '../dist/completion-blocks.js';

for (const shell of SHELLS) {
  const file = new URL(`../completions/cutout.${shell}`, import.meta.url);
  const before = readFileSync(file, 'utf8');
  const after = withGeneratedBlocks(before, shell);
  if (after !== before) writeFileSync(file, after);
  process.stdout.write(`completions/cutout.${shell}: ${after === before ? 'up to date' : 'rewritten'}\n`);
}
