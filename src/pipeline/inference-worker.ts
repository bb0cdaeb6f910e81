/**
 * Runs in a worker thread: onnxruntime's session.run blocks its thread for the whole inference
 * (seconds), so it must not run on the main event loop. One session per model file, created
 * lazily; one inference at a time (two intra-op threads already fill two cores).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';
import type { InferenceSession as Session } from 'onnxruntime-node';
import { requireCjs } from '../cjs.js';

export interface InferenceRequest {
  id: number;
  /** `unload`: release the session of `modelPath` (a pipeline that used it closed). */
  kind: 'run' | 'load' | 'unload';
  modelPath: string;
  inputName: string;
  outputName: string;
  dims?: number[];
  data?: Float32Array;
  threads: number;
  /** Use the CPU memory arena (see `arenaFor` in model.ts: on, except for very large images at fp32). */
  arena: boolean;
}

/** Sent once by the worker when onnxruntime has loaded (or failed to). */
export interface WorkerReady {
  ready: true;
}

export type InferenceReply =
  | { id: number; ok: true; data?: Float32Array; dims?: number[]; ms: number }
  | { id: number; ok: false; message: string };

type Ort = typeof import('onnxruntime-node');

// onnxruntime loads as soon as the thread starts (this thread exists to run it): its loading
// overlaps whatever the main thread does before it sends the first model. By require(), as
// cjs.ts says why: 11-12 ms against 17-20 ms by import() here. A failure to load is reported by
// the first request, which awaits the same promise.
const ortPromise = new Promise<Ort>((resolve) => resolve(requireCjs('onnxruntime-node') as Ort));
// Told once onnxruntime's native addon is registered (or failed to load): until then the thread
// must neither be terminated nor left behind by an exiting process, since a worker stopped inside
// the addon's registration aborts the whole process (inference-thread.ts, InferenceThread.start).
ortPromise.then(
  () => parentPort!.postMessage({ ready: true } satisfies WorkerReady),
  () => parentPort!.postMessage({ ready: true } satisfies WorkerReady),
);

/**
 * One session per model file, with the arena setting it was made with. A request that wants the
 * other setting releases the session and makes a new one (about 0.4 s): that happens only around
 * very large images, where the arena's retained memory would push the peak over its budget.
 */
const sessions = new Map<string, { arena: boolean; session: Promise<Session> }>();

/**
 * onnxruntime's own optimised copy of a model file, saved beside it after the first session in a
 * folder of its own: the graph (`model.onnx`) and, apart, its weights (`weights.data`), which
 * onnxruntime saves page-aligned and maps into memory instead of reading and copying them. A
 * session from it skips the graph optimisations and that copy. Measured here (fresh processes,
 * alternated): 25-27 ms against 169-192 ms for the fp32 model saved as one file, and 74-90 ms
 * against 117-127 ms at int8, whose integer weights are still prepacked at every load; the runs'
 * outputs and speed are the same. The copy may hold kernels chosen for this CPU (NCHWc layouts),
 * so its name carries onnxruntime's version and a digest of the CPU's feature flags: another
 * machine sharing the folder, or another onnxruntime, makes its own.
 */
function optimizedDirFor(modelPath: string, ortVersion: string): string {
  let flags = '';
  try {
    flags = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '';
  } catch {
    // Not Linux: the architecture and platform stand in for the flags.
  }
  const cpu = createHash('sha256').update(`${process.arch}:${process.platform}:${flags.trim()}`).digest('hex').slice(0, 10);
  return modelPath.replace(/\.onnx$/, '') + `.ort-${ortVersion}-${cpu}.optimized`;
}

const OPTIMIZED_GRAPH = 'model.onnx';
/** Weights of at least 1 KB go to the data file; the graph keeps the small ones (scales, shapes). */
const EXTERNAL_WEIGHTS = { optimized_model_external_initializers_file_name: 'weights.data', optimized_model_external_initializers_min_size_in_bytes: '1024' };

async function createSession(ort: Ort, modelPath: string, options: import('onnxruntime-node').InferenceSession.SessionOptions): Promise<Session> {
  if (process.env.CUTOUT_ORT_CACHE === '0') return ort.InferenceSession.create(modelPath, options);
  const dir = optimizedDirFor(modelPath, ort.env.versions?.common ?? 'unknown');
  if (fs.existsSync(path.join(dir, OPTIMIZED_GRAPH))) {
    try {
      return await ort.InferenceSession.create(path.join(dir, OPTIMIZED_GRAPH), { ...options, graphOptimizationLevel: 'disabled' });
    } catch {
      fs.rmSync(dir, { recursive: true, force: true }); // damaged or foreign: made again below
    }
  }
  // Saved in a temporary folder renamed once complete, so no process loads half a copy; of two
  // processes saving at once, the second's rename fails (the folder exists) and it drops its own.
  const tmp = `${dir}.${process.pid}.tmp`;
  try {
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.mkdirSync(tmp);
    // Severity 3 (errors only): onnxruntime warns that a copy with NCHWc kernels is for this CPU, which the name already ensures.
    const s = await ort.InferenceSession.create(modelPath, {
      ...options, optimizedModelFilePath: path.join(tmp, OPTIMIZED_GRAPH), logSeverityLevel: 3, extra: { session: EXTERNAL_WEIGHTS },
    });
    try {
      fs.renameSync(tmp, dir);
    } catch {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    return s;
  } catch {
    fs.rmSync(tmp, { recursive: true, force: true });
    return ort.InferenceSession.create(modelPath, options); // a read-only folder: no copy, as before
  }
}

async function session(modelPath: string, threads: number, arena: boolean): Promise<Session> {
  const held = sessions.get(modelPath);
  if (held && held.arena === arena) return held.session;
  if (held) {
    sessions.delete(modelPath);
    await (await held.session.catch(() => null))?.release();
  }
  const s = ortPromise.then((ort) =>
    createSession(ort, modelPath, {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      // Measured here: 'parallel' is 1.8x slower; sequential with the intra-op threads on all cores is fastest.
      executionMode: 'sequential',
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      // The CPU arena keeps the run's allocations for the session's life (about 0.7 GB at
      // 1024x1024) and makes each warm run about 1.4x faster than allocating afresh. The
      // memory pattern on top of it doubled the resident memory for no speed: it stays off.
      enableCpuMemArena: arena,
      enableMemPattern: false,
    }),
  );
  s.catch(() => sessions.delete(modelPath));
  sessions.set(modelPath, { arena, session: s });
  return s;
}

// This module is a worker thread's entry: its state (the sessions above, this queue) belongs to
// that thread, one per Worker a pipeline starts, and is never shared between pipelines.
let chain: Promise<void> = Promise.resolve();

async function handle(req: InferenceRequest): Promise<void> {
  const started = performance.now();
  try {
    if (req.kind === 'unload') {
      const held = sessions.get(req.modelPath);
      sessions.delete(req.modelPath);
      await (await held?.session.catch(() => null))?.release();
      parentPort!.postMessage({ id: req.id, ok: true, ms: performance.now() - started } satisfies InferenceReply);
      return;
    }
    const s = await session(req.modelPath, req.threads, req.arena);
    if (req.kind === 'load') {
      parentPort!.postMessage({ id: req.id, ok: true, ms: performance.now() - started } satisfies InferenceReply);
      return;
    }
    const ort = await ortPromise;
    const input = new ort.Tensor('float32', req.data!, req.dims!);
    // Fetch only the output we read: the other outputs of ISNet cost time and memory.
    const out = await s.run({ [req.inputName]: input }, [req.outputName]);
    const tensor = out[req.outputName];
    const data = tensor.data as Float32Array;
    const reply: InferenceReply = { id: req.id, ok: true, data, dims: [...tensor.dims], ms: performance.now() - started };
    parentPort!.postMessage(reply, [data.buffer as ArrayBuffer]);
    input.dispose?.();
  } catch (err) {
    parentPort!.postMessage({ id: req.id, ok: false, message: (err as Error).message ?? String(err) } satisfies InferenceReply);
  }
}

parentPort!.on('message', (req: InferenceRequest) => {
  chain = chain.then(() => handle(req));
});
