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
  registerCompletion(program);
  // `cutout --help` shows the main command's flags too, from that command's own help (no copy to drift).
  const remove = program.commands.find((c) => c.name() === 'remove')!;
  program.addHelpText('after', () => `\nThe main command, cutout [remove] <inputs...> ("remove" may be left out):\n\n${remove.helpInformation().trimEnd()}\n${REMOVE_DEFAULTS_HELP}\n`);
  return program;
}
