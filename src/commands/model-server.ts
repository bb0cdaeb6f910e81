/**
 * `cutout model-server`: the local model over the Open Inference Protocol v2 (src/oip/server.ts).
 * Prints `listening on http://HOST:PORT` once the model is loaded; stops on SIGINT/SIGTERM after
 * the inferences in flight. Its address and token are its own settings (CUTOUT_MODEL_SERVER_HOST,
 * CUTOUT_MODEL_SERVER_PORT, CUTOUT_MODEL_SERVER_TOKEN), never serve's CUTOUT_HOST/CUTOUT_PORT: a
 * config that opens serve to the network does not open the model server.
 */
import fs from 'node:fs';
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import { addSettingFlags, flagsGiven } from './setting-flags.js';

export function registerModelServer(program: Command): void {
  const command = program
    .command('model-server')
    .description('serve the model over the Open Inference Protocol v2 (KServe v2 / Triton), for serve --upstream');
  addSettingFlags(command, 'model-server')
    .action(async (flags: Record<string, unknown>) => {
      const config = await loadConfig(flagsGiven(command, flags, 'model-server'));
      const { createPipeline } = await import('../pipeline/index.js');
      const { startModelServer, modelsToServe, pipelineModel } = await import('../oip/server.js');
      const { int8Sides, resolvePrecision } = await import('../toolchain/int8.js');
      const { CutoutError } = await import('../errors.js');
      // Each model name runs at its own precision (server.ts passes it on every call).
      const pipeline = createPipeline({
        model: config.model, precision: config.precision, dataDir: config.dataDir,
        inferenceWorkers: config.inferenceWorkers, threads: config.inferenceThreads,
        onPreparation: (event) => {
          if (event.state === 'start') process.stderr.write(`cutout model-server: preparing model ${event.model} (${event.step}) for its first use; nothing is downloaded\n`);
        },
      });
      const manifest = pipeline.manifest;
      const sides = int8Sides(manifest);
      if (config.precision === 'int8' && sides.length === 0) {
        throw new CutoutError('invalid_request', `Model ${manifest.name} has no int8 copy (no calibration data); use --precision fp32 or auto`);
      }
      const models = modelsToServe(manifest, config.precision, sides, (side) => resolvePrecision(manifest, 'auto', side));
      const model = pipelineModel(pipeline);
      const version = (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
      // Traces only when the OTEL_* variables ask for them (the SDK is not loaded otherwise); a
      // service name of its own, so that a trace tells serve's spans from the model server's.
      const { startTracing } = await import('../telemetry/tracing.js');
      const tracing = await startTracing({ name: 'cutout-model-server', version });
      const server = await startModelServer({
        host: config.modelServerHost, port: config.modelServerPort, manifest, model, version, models, token: config.modelServerToken, tracing,
      });
      process.stdout.write(`listening on ${server.url}\n`);
      const hugePages = (await import('../launcher/hugepages.js')).hugePagesStatus();
      process.stderr.write(`cutout model-server: serving ${models.map((m) => m.name).join(', ')}${config.modelServerToken ? ' (token required)' : ''}; huge pages ${hugePages.in_force ? 'on' : 'off'} (${hugePages.reason})\n`);
      await new Promise<void>((resolve) => {
        const stop = (signal: NodeJS.Signals) => {
          process.stderr.write(`cutout model-server: ${signal}, finishing inferences in flight\n`);
          void server.close().then(resolve);
        };
        process.once('SIGINT', stop);
        process.once('SIGTERM', stop);
      });
      await pipeline.close();
      await tracing.shutdown();
      setTimeout(() => process.exit(), 2000).unref();
    });
}
