/**
 * Runs in a worker thread: onnxruntime's session.run blocks its thread for the whole inference
 * (seconds), so it must not run on the main event loop. One session per model file, created
 * lazily; one inference at a time (two intra-op threads already fill two cores).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { parentPort } from 'node:worker_threads';
import type { InferenceSession as Session } from 'onnxruntime-node';

export interface InferenceRequest {
  id: number;
  kind: 'run' | 'load';
  modelPath: string;
  inputName: string;
  outputName: string;
  dims?: number[];
  data?: Float32Array;
  threads: number;
  /** Use the CPU memory arena (see `arenaFor` in model.ts: on, except for very large images). */
  arena: boolean;
}

export type InferenceReply =
  | { id: number; ok: true; data?: Float32Array; dims?: number[]; ms: number }
  | { id: number; ok: false; message: string };

type Ort = typeof import('onnxruntime-node');
let ortPromise: Promise<Ort> | null = null;
/**
 * One session per model file, with the arena setting it was made with. A request that wants the
 * other setting releases the session and makes a new one (about 0.4 s): that happens only around
 * very large images, where the arena's retained memory would push the peak over its budget.
 */
const sessions = new Map<string, { arena: boolean; session: Promise<Session> }>();

/**
 * onnxruntime's own optimised copy of a model file, saved beside it after the first session: a
 * session loads it without redoing the graph optimisations (measured 0.23 s against 0.40 s for
 * the fp32 model). The copy may hold kernels chosen for this CPU (NCHWc layouts), so its name
 * carries onnxruntime's version and a digest of the CPU's feature flags: another machine sharing
 * the folder, or another onnxruntime, makes its own.
 */
function optimizedPathFor(modelPath: string, ortVersion: string): string {
  let flags = '';
  try {
    flags = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '';
  } catch {
    // Not Linux: the architecture and platform stand in for the flags.
  }
  const cpu = createHash('sha256').update(`${process.arch}:${process.platform}:${flags.trim()}`).digest('hex').slice(0, 10);
  return modelPath.replace(/\.onnx$/, '') + `.ort-${ortVersion}-${cpu}.optimized.onnx`;
}

async function createSession(ort: Ort, modelPath: string, options: import('onnxruntime-node').InferenceSession.SessionOptions): Promise<Session> {
  if (process.env.CUTOUT_ORT_CACHE === '0') return ort.InferenceSession.create(modelPath, options);
  const optimized = optimizedPathFor(modelPath, ort.env.versions?.common ?? 'unknown');
  if (fs.existsSync(optimized)) {
    try {
      return await ort.InferenceSession.create(optimized, { ...options, graphOptimizationLevel: 'disabled' });
    } catch {
      fs.rmSync(optimized, { force: true }); // damaged or foreign: made again below
    }
  }
  // Saved under a temporary name and renamed once complete, so no process loads half a file.
  const tmp = `${optimized}.${process.pid}.tmp`;
  try {
    // Severity 3 (errors only): onnxruntime warns that a copy with NCHWc kernels is for this CPU, which the name already ensures.
    const s = await ort.InferenceSession.create(modelPath, { ...options, optimizedModelFilePath: tmp, logSeverityLevel: 3 });
    fs.renameSync(tmp, optimized);
    return s;
  } catch {
    fs.rmSync(tmp, { force: true });
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
  ortPromise ??= import('onnxruntime-node');
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

let chain: Promise<void> = Promise.resolve();

async function handle(req: InferenceRequest): Promise<void> {
  const started = performance.now();
  try {
    const s = await session(req.modelPath, req.threads, req.arena);
    if (req.kind === 'load') {
      parentPort!.postMessage({ id: req.id, ok: true, ms: performance.now() - started } satisfies InferenceReply);
      return;
    }
    const ort = await ortPromise!;
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

// onnxruntime loads as soon as the thread starts (this thread exists to run it): its loading
// overlaps whatever the main thread does before it sends the first model. A failure to load is
// reported by the first request, which awaits the same promise.
ortPromise = import('onnxruntime-node');
ortPromise.catch(() => undefined);

parentPort!.on('message', (req: InferenceRequest) => {
  chain = chain.then(() => handle(req));
});
