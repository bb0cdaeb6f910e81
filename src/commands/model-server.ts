/**
 * `cutout model-server`: the local model over the Open Inference Protocol v2 (src/oip/server.ts).
 * Prints `listening on http://HOST:PORT` once the model is loaded; stops on SIGINT/SIGTERM after
 * the inferences in flight.
 */
import fs from 'node:fs';
import type { Command } from 'commander';
import { loadConfig } from '../config.js';

interface ModelServerFlags {
  host?: string;
  port?: string;
  model?: string;
  precision?: string;
  inferenceWorkers?: string;
  inferenceThreads?: string;
  data?: string;
  config?: string;
}

export function registerModelServer(program: Command): void {
  program
    .command('model-server')
    .description('serve the model over the Open Inference Protocol v2 (KServe v2 / Triton), for serve --upstream')
    .option('--host <host>', 'bind address (env CUTOUT_HOST; default 127.0.0.1)')
    .option('--port <port>', 'port; 0 picks a free one (env CUTOUT_PORT; default 8000, as Triton)')
    .option('--model <name|file>', 'the model (env CUTOUT_MODEL; default: the default model)')
    .option('--precision <precision>', 'auto | fp32 | int8: the number format of the model served (env CUTOUT_PRECISION; default auto: int8 on a CPU with VNNI)')
    .option('--inference-workers <n>', 'inference worker threads, each with its own session (default: 1 up to 8 cores, then one per 8 cores; docs/benchmarks.md)')
    .option('--inference-threads <n>', 'intra-op threads of each session (default: the cores over the workers; env CUTOUT_THREADS)')
    .option('--data <dir>', 'data directory (default: $CUTOUT_HOME or ~/.cutout)')
    .option('--config <file>', 'config file (default: found by cosmiconfig, module name "cutout")')
    .action(async (flags: ModelServerFlags) => {
      // Triton's HTTP port is the default, unless a flag, the environment or the config says otherwise.
      const given = { host: flags.host, port: flags.port ?? (process.env.CUTOUT_PORT ? undefined : 8000), model: flags.model, precision: flags.precision, dataDir: flags.data, inferenceWorkers: flags.inferenceWorkers, inferenceThreads: flags.inferenceThreads };
      const config = await loadConfig(given, { configFile: flags.config });
      const { createPipeline } = await import('../pipeline/index.js');
      const { startModelServer } = await import('../oip/server.js');
      // Clients see FP32 tensors either way; int8 is how this server computes them.
      const pipeline = createPipeline({
        model: config.model, precision: config.precision, dataDir: config.dataDir,
        inferenceWorkers: config.inferenceWorkers, threads: config.inferenceThreads,
        onPreparation: (event) => {
          if (event.state === 'start') process.stderr.write(`cutout model-server: preparing model ${event.model} (${event.step}) for its first use; nothing is downloaded\n`);
        },
      });
      const manifest = pipeline.manifest;
      const model = {
        loadModel: (_manifest: unknown, side?: number) => pipeline.loadModel({ side }),
        runModel: (_manifest: unknown, tensor: Float32Array, width: number, height: number) => pipeline.runModel(tensor, width, height),
      };
      const version = (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
      const server = await startModelServer({ host: config.host, port: config.port, manifest, model, version });
      process.stdout.write(`listening on ${server.url}\n`);
      await new Promise<void>((resolve) => {
        const stop = (signal: NodeJS.Signals) => {
          process.stderr.write(`cutout model-server: ${signal}, finishing inferences in flight\n`);
          void server.close().then(resolve);
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      await pipeline.close();
      setTimeout(() => process.exit(), 2000).unref();
    });
}
