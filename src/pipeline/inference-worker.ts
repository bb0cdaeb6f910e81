/**
 * Runs in a worker thread: onnxruntime's session.run blocks its thread for the whole inference
 * (seconds), so it must not run on the main event loop. One session per model file, created
 * lazily; one inference at a time (two intra-op threads already fill two cores).
 */
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

async function session(modelPath: string, threads: number, arena: boolean): Promise<Session> {
  const held = sessions.get(modelPath);
  if (held && held.arena === arena) return held.session;
  if (held) {
    sessions.delete(modelPath);
    await (await held.session.catch(() => null))?.release();
  }
  ortPromise ??= import('onnxruntime-node');
  const s = ortPromise.then((ort) =>
    ort.InferenceSession.create(modelPath, {
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

parentPort!.on('message', (req: InferenceRequest) => {
  chain = chain.then(() => handle(req));
});
