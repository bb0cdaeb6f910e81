/**
 * The top-level command names, readable before the program itself loads: the CLI starts the
 * inference worker at once when the arguments ask for a cutout (cold start, docs/internals.md). A test
 * checks this list against the registered commands.
 */
import fs from 'node:fs';

export const COMMAND_NAMES = ['remove', 'models', 'serve', 'model-server', 'keys', 'credits', 'account', 'usage', 'openapi', 'health', 'completion', 'help'] as const;

/**
 * Whether a word where a command is expected is meant as one (`cutout watch photos/`, a mistyped
 * or missing command) rather than an input: a bare word (letters, digits, `-` and `_`: no dot,
 * path separator or glob character) that names no existing file or folder. `photo.jpg`, `./photo`
 * and `photos/` are inputs even when they are missing ("No such file"); so is an existing `photos`.
 */
export function isCommandWord(arg: string): boolean {
  return /^[A-Za-z][A-Za-z0-9_-]*$/.test(arg) && !fs.existsSync(arg);
}

/**
 * Whether these arguments run the default command, a cutout: the first argument that is not a
 * flag (or is `-`, stdin) names no other command, and the first argument is not a word that
 * reads as a command and names no file (an unknown command, refused: program.ts). A flag's value
 * can be taken for that argument (`--data dir serve`); a wrong guess only starts or skips the
 * worker early, nothing else.
 */
export function runsRemove(args: readonly string[]): boolean {
  const first = args.find((a) => a === '-' || !a.startsWith('-'));
  if (first === undefined) return false;
  if (first === 'remove') return true;
  return !(COMMAND_NAMES as readonly string[]).includes(first) && !(args[0] === first && isCommandWord(first));
}

/** The closest of `names` to a mistyped `word`, as commander suggests for an unknown subcommand or option. */
export function closestName(word: string, names: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const name of names) {
    const distance = editDistance(word, name);
    const similarity = (Math.max(word.length, name.length) - distance) / Math.max(word.length, name.length);
    if (similarity > 0.4 && distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
  }
  return best;
}

/** Damerau-Levenshtein distance (optimal string alignment): a swap of two letters counts one. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The value of `--flag VALUE` or `--flag=VALUE` in raw arguments. */
function flagValue(args: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag) return args[i + 1];
    if (args[i].startsWith(`${flag}=`)) return args[i].slice(flag.length + 1);
  }
  return undefined;
}

/**
 * Whether cli.ts starts the model's worker before the program loads (cold start): for a cutout,
 * except a dry run (no model) and a rerun from a manifest that exists, without --force, where
 * every input may be done already and the rerun must not start the model at all. batch.ts
 * (startsModelAtOnce) decides the same from the parsed flags.
 */
export function startsModelEarly(args: readonly string[]): boolean {
  if (!runsRemove(args) || args.includes('--dry-run')) return false;
  const manifest = flagValue(args, '--manifest');
  return manifest === undefined || args.includes('--force') || !fs.existsSync(manifest);
}
