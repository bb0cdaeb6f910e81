/**
 * The top-level command names, readable before the program itself loads: the CLI starts the
 * inference worker at once when the arguments ask for a cutout (cold start, docs/internals.md). A test
 * checks this list against the registered commands.
 */
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
