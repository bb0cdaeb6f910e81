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
}

export type InferenceReply =
  | { id: number; ok: true; data?: Float32Array; dims?: number[]; ms: number }
  | { id: number; ok: false; message: string };

type Ort = typeof import('onnxruntime-node');
let ortPromise: Promise<Ort> | null = null;
const sessions = new Map<string, Promise<Session>>();

function session(modelPath: string, threads: number): Promise<Session> {
  let s = sessions.get(modelPath);
  if (!s) {
    ortPromise ??= import('onnxruntime-node');
    s = ortPromise.then((ort) =>
      ort.InferenceSession.create(modelPath, {
        executionProviders: ['cpu'],
        graphOptimizationLevel: 'all',
        // Measured here: 'parallel' is 1.8x slower; sequential with the intra-op threads on all cores is fastest.
        executionMode: 'sequential',
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        // The arena keeps every peak allocation for the life of the session (GBs at 1024x1024);
        // without it memory goes back to the allocator after each run.
        enableCpuMemArena: false,
        enableMemPattern: false,
      }),
    );
    s.catch(() => sessions.delete(modelPath));
    sessions.set(modelPath, s);
  }
  return s;
}

let chain: Promise<void> = Promise.resolve();

async function handle(req: InferenceRequest): Promise<void> {
  const started = performance.now();
  try {
    const s = await session(req.modelPath, req.threads);
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
