/**
 * The top-level command names, readable before the program itself loads: the CLI starts the
 * inference worker at once when the arguments ask for a cutout (cold start, docs/internals.md). A test
 * checks this list against the registered commands.
 */
import { existsSync } from 'node:fs';

export const COMMAND_NAMES = ['remove', 'models', 'serve', 'model-server', 'keys', 'credits', 'account', 'usage', 'openapi', 'completion', 'help'] as const;

/**
 * Whether these arguments run the default command, a cutout: the first argument that is not a
 * flag (or is `-`, stdin) names no other command. A flag's value can be taken for that argument
 * (`--data dir serve`); a wrong guess only starts or skips the worker early, nothing else.
 */
export function runsRemove(args: readonly string[]): boolean {
  const first = args.find((a) => a === '-' || !a.startsWith('-'));
  if (first === undefined) return false;
  return first === 'remove' || !(COMMAND_NAMES as readonly string[]).includes(first);
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
  return manifest === undefined || args.includes('--force') || !existsSync(manifest);
}
