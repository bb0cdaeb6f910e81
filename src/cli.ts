/**
 * The `cutout` program. Command modules are registered here and load their heavy dependencies
 * (sharp, onnxruntime, sqlite3) only inside their actions, so --help and --version answer fast.
 * Exit codes: 0 success, 1 some input failed or a runtime error, 2 usage error.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { CutoutError } from './errors.js';
import { registerRemove } from './commands/remove.js';
import { registerModels } from './commands/models.js';
import { registerServe } from './commands/serve.js';
import { registerKeys } from './commands/keys.js';
import { registerCredits } from './commands/credits.js';
import { registerAccount } from './commands/account.js';
import { registerOpenapi } from './commands/openapi.js';
import { registerCompletion } from './commands/completion.js';
import { UsageError } from './commands/usage-error.js';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

export function buildProgram(): Command {
  const program = new Command('cutout')
    .description('Remove the background of photos, locally or as an HTTP API.')
    .version(pkg.version, '-V, --version')
    .showHelpAfterError('(try --help)')
    // Subcommands inherit this: commander's own usage errors exit with 2, not 1.
    .exitOverride();
  registerRemove(program);
  registerModels(program);
  registerServe(program);
  registerKeys(program);
  registerCredits(program);
  registerAccount(program);
  registerOpenapi(program);
  registerCompletion(program);
  return program;
}

/**
 * A reader that stops early (`cutout models list | head -1`) closes the pipe: stop quietly with
 * the exit code so far, as Unix tools do, instead of crashing on EPIPE.
 */
function stopQuietlyOnClosedStdout(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') process.stderr.write(`cutout: cannot write to stdout: ${err.message}\n`);
    process.exit(err.code === 'EPIPE' ? (typeof process.exitCode === 'number' ? process.exitCode : 0) : 1);
  });
}

export async function main(argv = process.argv): Promise<void> {
  stopQuietlyOnClosedStdout();
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version "fail" with exit code 0.
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`cutout: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    if (err instanceof CutoutError) {
      process.stderr.write(`cutout: ${err.message}\n`);
      process.exitCode = err.code === 'invalid_request' ? 2 : 1;
      return;
    }
    process.stderr.write(`cutout: ${(err as Error)?.message ?? String(err)}\n`);
    process.exitCode = 1;
  }
}

await main();
