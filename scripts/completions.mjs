// `npm run completions`: rewrites the image-flag block of each script in completions/ from the
// options table (src/commands/completion-blocks.ts says why); the rest of each script is written by hand.
import { readFileSync, writeFileSync } from 'node:fs';
import { SHELLS } from '../dist/commands/completion.js';
import { withImageFlags } from '../dist/commands/completion-blocks.js';

for (const shell of SHELLS) {
  const file = new URL(`../completions/cutout.${shell}`, import.meta.url);
  const before = readFileSync(file, 'utf8');
  const after = withImageFlags(before, shell);
  if (after !== before) writeFileSync(file, after);
  process.stdout.write(`completions/cutout.${shell}: ${after === before ? 'up to date' : 'rewritten'}\n`);
}
