/**
 * Runs the `cutout` program (its commands are in program.ts): parses the arguments and turns
 * errors into one line on stderr and the exit code: 0 success, 1 some input failed or a runtime
 * error, 2 usage error.
 */
import { startsModelEarly } from './commands/names.js';

// Cold start: a cutout's inference worker starts before the program's own modules load (awaited
// first: started beside them it came 40 ms later), so that the thread's start and onnxruntime's
// loading (about 100 ms) overlap them (docs/internals.md, "Cold start"). Not for a dry run, nor
// for a rerun from an existing --manifest, which must not start the model when all is done.
if (startsModelEarly(process.argv.slice(2))) {
  await import('./pipeline/inference-thread.js').then((thread) => thread.startInferenceThread(), () => undefined);
}

const [{ requireCjs }, { CutoutError, oneLine }, { buildProgram }, { UsageError }, { shadowAsSwitch }] = await Promise.all([
  import('./cjs.js'),
  import('./errors.js'),
  import('./program.js'),
  import('./commands/usage-error.js'),
  import('./commands/image-flags.js'),
]);
const { CommanderError } = requireCjs('commander') as typeof import('commander');

/**
 * A reader that stops early (`cutout models list | head -1`) closes the pipe: stop quietly with
 * the exit code so far, as Unix tools do, instead of crashing on EPIPE. A model call in flight
 * in the inference worker is waited for first (no new one starts): exiting during one aborts the
 * process (pipeline/inference-thread.ts, drainInferenceThreads).
 */
function stopQuietlyOnClosedStdout(): void {
  let stopping = false;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (stopping) return;
    stopping = true;
    if (err.code !== 'EPIPE') process.stderr.write(`cutout: cannot write to stdout: ${err.message}\n`);
    const exit = () => process.exit(err.code === 'EPIPE' ? (typeof process.exitCode === 'number' ? process.exitCode : 0) : 1);
    import('./pipeline/inference-thread.js').then((thread) => thread.drainInferenceThreads()).then(exit, exit);
  });
}

export async function main(argv = process.argv): Promise<void> {
  stopQuietlyOnClosedStdout();
  const program = buildProgram();
  try {
    await program.parseAsync(shadowAsSwitch(argv));
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version "fail" with exit code 0.
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`cutout: ${oneLine(err.message)}\n`);
      process.exitCode = 2;
      return;
    }
    if (err instanceof CutoutError) {
      process.stderr.write(`cutout: ${oneLine(err.message)}\n`);
      process.exitCode = err.code === 'invalid_request' ? 2 : 1;
      return;
    }
    process.stderr.write(`cutout: ${oneLine(String((err as Error)?.message ?? err))}\n`);
    process.exitCode = 1;
  }
}

await main();
