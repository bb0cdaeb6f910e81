/**
 * Preloaded into a cutout child process (`node --import this bin/cutout ...`): appends one line to
 * the file named by CUTOUT_TEST_WORKER_LOG for every worker thread the process starts. The model
 * runs only in a worker thread (pipeline/inference-thread.ts), so an empty log proves that a run
 * started no model at all, without a word from cutout itself.
 */
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import workerThreads from 'node:worker_threads';

const log = process.env.CUTOUT_TEST_WORKER_LOG;
if (log && workerThreads.isMainThread) {
  const Original = workerThreads.Worker;
  workerThreads.Worker = class extends Original {
    constructor(file, options) {
      fs.appendFileSync(log, `${String(file)}\n`);
      super(file, options);
    }
  };
  syncBuiltinESMExports(); // `import { Worker } from 'node:worker_threads'` sees the wrapper too
}
