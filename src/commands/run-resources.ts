/**
 * What a `cutout remove` run opens, each only when it is needed: the pipeline (with the model's
 * worker thread) and the store. An unchanged rerun from a manifest, or a dry run, opens neither;
 * all are closed on every path, since an open PostgreSQL pool or a worker would keep the CLI alive.
 */
import type { CutoutConfig } from '../config.js';
import type { CutoutPipeline } from '../pipeline/index.js';
import type { PreparationEvent } from '../toolchain/weights.js';
import type { Store } from '../store/db.js';
import type { Payer } from './remove-item.js';
import type { Reporter } from './progress.js';
import { CutoutError } from '../errors.js';
import { UsageError } from './usage-error.js';

type PipelineModule = typeof import('../pipeline/index.js');

/**
 * Starts the model's worker thread and loads the pipeline's module. The thread is usually running
 * already (cli.ts starts it when the arguments look like a cutout); started here too for arguments
 * that guess missed, before the configuration is read and sharp and the store load, so its start
 * and onnxruntime's loading overlap them.
 */
export function startInference(): Promise<PipelineModule> {
  return import('../pipeline/inference-thread.js').then((thread) => {
    thread.startInferenceThread();
    return import('../pipeline/index.js');
  });
}

export class RunResources {
  private store: Promise<Store> | null = null;
  private pipeline: CutoutPipeline | null = null;
  private reporter: Reporter | null = null;
  /** Preparation events that come before the progress display exists, held for it. */
  private readonly early: PreparationEvent[] = [];

  /** `started`: the pipeline's module, when the model was started ahead of planning (cold start). */
  constructor(private readonly config: CutoutConfig, private started: Promise<PipelineModule> | null) {}

  openStore(): Promise<Store> {
    this.store ??= import('../store/db.js').then(({ openStore }) => openStore(this.config.dataDir, { url: this.config.store }));
    return this.store;
  }

  /** The payer of `--key`; a usage error when the key is invalid or revoked. */
  async authenticate(key: string): Promise<Payer> {
    // An expired key is a bad flag value too (exit code 2), saying when it expired.
    const payer = await (await this.openStore()).keys.authenticate(key).catch((err: unknown) => {
      throw err instanceof CutoutError && err.reason === 'key_expired' ? new UsageError(`--key: ${err.message}`) : err;
    });
    if (!payer) throw new UsageError('--key: invalid or revoked API key');
    return payer;
  }

  /** The pipeline, made (and its thread started) on first call; an unknown model is a usage error. */
  async model(): Promise<CutoutPipeline> {
    if (this.pipeline) return this.pipeline;
    this.started ??= startInference();
    const { createPipeline } = await this.started;
    if (this.pipeline) return this.pipeline;
    const { config } = this;
    try {
      this.pipeline = createPipeline({
        model: config.model, precision: config.precision, dataDir: config.dataDir,
        inferenceWorkers: config.inferenceWorkers, threads: config.inferenceThreads,
        onPreparation: (event) => (this.reporter ? this.reporter.preparation(event) : this.early.push(event)),
      });
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    return this.pipeline;
  }

  attachReporter(reporter: Reporter): void {
    this.reporter = reporter;
    for (const event of this.early.splice(0)) reporter.preparation(event);
  }

  /** Lets the model's thread go (more images past their model call only; see CutoutPipeline.releaseModel). */
  releaseModel(): void {
    this.pipeline?.releaseModel().catch(() => undefined);
  }

  async close(): Promise<void> {
    const store = this.store;
    this.store = null;
    try {
      if (store) await (await store.catch(() => null))?.close();
    } finally {
      await this.pipeline?.close();
    }
  }
}
