/**
 * The `cutout` program's commands and flags, apart from running it (cli.ts), so that tests can
 * read every option (the completion scripts are checked against them). Command modules load their
 * heavy dependencies (sharp, onnxruntime, sqlite3) only inside their actions.
 */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { requireCjs } from './cjs.js';
import { registerRemove, REMOVE_DEFAULTS_HELP } from './commands/remove.js';
import { registerModels } from './commands/models.js';
import { registerServe } from './commands/serve.js';
import { registerModelServer } from './commands/model-server.js';
import { registerKeys } from './commands/keys.js';
import { registerCredits } from './commands/credits.js';
import { registerAccount } from './commands/account.js';
import { registerOpenapi } from './commands/openapi.js';
import { registerCompletion } from './commands/completion.js';
import { registerHealth } from './commands/health.js';
import { closestName, COMMAND_NAMES, isCommandWord } from './commands/names.js';
import { UsageError } from './commands/usage-error.js';

const commander = requireCjs('commander') as typeof import('commander');
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

export function buildProgram(): Command {
  const program = new commander.Command('cutout')
    .description('Remove the background of photos, locally or as an HTTP API.')
    .version(pkg.version, '-V, --version')
    // One line, like every other error: "cutout: unknown option '--x' (try cutout --help)".
    .configureOutput({
      outputError: (message, write) => write(`cutout: ${message.replace(/^error: /, '').trim()} (try cutout --help)\n`),
    })
    // Subcommands inherit this: commander's own usage errors exit with 2, not 1.
    .exitOverride();
  registerRemove(program);
  registerModels(program);
  registerServe(program);
  registerModelServer(program);
  registerKeys(program);
  registerCredits(program);
  registerAccount(program);
  registerOpenapi(program);
  registerHealth(program);
  registerCompletion(program);
  refuseUnknownCommands(program);
  // `cutout --help` shows the main command's flags too, from that command's own help (no copy to drift).
  const remove = program.commands.find((c) => c.name() === 'remove')!;
  program.addHelpText('after', () => `\nThe main command, cutout [remove] <inputs...> ("remove" may be left out):\n\n${remove.helpInformation().trimEnd()}\n${REMOVE_DEFAULTS_HELP}\n`);
  return program;
}

/**
 * `cutout watch photos/`: "remove" may be left out, so commander hands a first word that names no
 * command to it as an input, and the rest ran. Such a word (names.ts, isCommandWord: a bare word
 * that is no file) where the command is expected is an unknown command: exit 2, nothing written.
 * After `remove` itself, a word is an input like any other (`cutout remove watch`: no such file).
 */
function refuseUnknownCommands(program: Command): void {
  let removeNamed = false;
  program.hook('preSubcommand', (root, sub) => {
    removeNamed = sub.name() === 'remove' && root.args[0] === 'remove';
  });
  program.hook('preAction', (_root, action) => {
    if (action.name() !== 'remove' || removeNamed) return;
    const first = (action.processedArgs[0] as string[] | undefined)?.[0];
    if (first === undefined || !isCommandWord(first)) return;
    if ((COMMAND_NAMES as readonly string[]).includes(first)) {
      throw new UsageError(`'${first}' is a command: write it before the flags (cutout ${first} ...)`);
    }
    const names = program.commands.map((c) => c.name());
    const suggestion = closestName(first, names);
    throw new UsageError(`unknown command '${first}'${suggestion ? ` (did you mean ${suggestion}?)` : ''}, and no file or folder of that name; see cutout --help`);
  });
}
