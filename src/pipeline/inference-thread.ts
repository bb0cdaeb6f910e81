/**
 * The inference worker threads: each holds sessions, one per model file, and runs one inference
 * at a time (inference-worker.ts). Apart from model.ts, and importing next to nothing, so that the
 * CLI can start a thread before anything else of the program loads (cold start, docs/internals.md): the
 * thread's start and onnxruntime's loading are the longer branch before the first inference.
 *
 * Pipelines share threads: a thread per intra-op thread count, held by leases. Two pipelines that
 * run the same model file share its session (one copy of the weights and of onnxruntime's arena
 * in memory), and their inferences take turns, as they would for the cores anyway. A lease
 * released unloads the sessions that no other lease used; the last one stops the thread. The
 * registry of threads is the one piece of process-wide state of the pipeline: a pool of
 * resources, never configuration (which model, precision or folder lives in each pipeline).
 */
import { Worker } from 'node:worker_threads';
import { usableCores } from '../container-limits.js';
import { CutoutError } from '../errors.js';
import type { InferenceReply, InferenceRequest, WorkerReady } from './inference-worker.js';

/**
 * Intra-op threads: every core this process may use (measured fastest on two cores), a container's
 * CPU limit included (container-limits.ts). Override with CUTOUT_THREADS.
 */
export function defaultThreadCount(): number {
  const fromEnv = Number(process.env.CUTOUT_THREADS);
  if (Number.isInteger(fromEnv) && fromEnv > 0) return fromEnv;
  return usableCores();
}

type Pending = { resolve: (r: Extract<InferenceReply, { ok: true }>) => void; reject: (e: Error) => void };
type Request = Omit<InferenceRequest, 'id' | 'threads'>;

/** How long a stop waits for inferences in flight before it stops the worker anyway. */
const STOP_WAIT_MS = 60_000;

/** Resolves once `inFlight()` is 0, or at `until` (epoch ms). */
async function settled(inFlight: () => number, until: number): Promise<void> {
  while (inFlight() > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** One worker thread and the requests in flight in it. */
class InferenceThread {
  private worker: Worker | null = null;
  /** Resolves once the worker has loaded onnxruntime (or failed to, or stopped): see start(). */
  private loaded: Promise<void> = Promise.resolve();
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** Set by drain: the process is about to exit, no new model call starts. */
  private draining = false;

  constructor(readonly threads: number) {}

  get inFlight(): number {
    return this.pending.size;
  }

  get started(): boolean {
    return this.worker !== null;
  }

  /**
   * Starts the worker, which loads onnxruntime at once. Until it has (about 100 ms), the worker
   * keeps the process alive and stop() waits: a process that exits, or a terminate(), while the
   * worker is inside the native addon's registration (napi_register_module_v1) makes a N-API call
   * fail there, and the C++ exception it throws ends in std::terminate: the whole process aborts
   * (exit 134, "terminate called after throwing an instance of 'Napi::Error'"). That was issue 37:
   * a usage error found while the early-started worker was still loading onnxruntime.
   */
  start(): Worker {
    if (this.worker) return this.worker;
    // The worker's file beside this one, in the built package. When the source itself runs through
    // a TypeScript loader (the tests, with tsx), a new thread gets no loader hooks on Node 20 (tsx
    // registers them in the main thread only), so the thread runs the built worker, which the
    // tests' setup keeps current (test/setup/build.ts), with the one module it imports (cjs.js).
    const file = import.meta.url.endsWith('.ts') ? '../../dist/pipeline/inference-worker.js' : './inference-worker.js';
    const w = new Worker(new URL(file, import.meta.url));
    let ready = false;
    let markLoaded!: () => void;
    this.loaded = new Promise((resolve) => (markLoaded = resolve));
    // An idle worker must not keep a process alive (a CLI, a library user's script), a loading one must.
    const unrefIfIdle = () => {
      if (ready && this.pending.size === 0) w.unref();
    };
    w.on('message', (reply: InferenceReply | WorkerReady) => {
      if ('ready' in reply) {
        ready = true;
        markLoaded();
        unrefIfIdle();
        return;
      }
      const p = this.pending.get(reply.id);
      if (!p) return;
      this.pending.delete(reply.id);
      unrefIfIdle();
      if (reply.ok) p.resolve(reply);
      else p.reject(new CutoutError('processing_failed', `Model error: ${reply.message}`));
    });
    const failAll = (err: Error) => {
      if (this.worker === w) this.worker = null;
      markLoaded();
      for (const p of this.pending.values()) p.reject(new CutoutError('processing_failed', `Inference worker stopped: ${err.message}`));
      this.pending.clear();
    };
    w.on('error', failAll);
    w.on('exit', (code) => failAll(new Error(`exit code ${code}`)));
    this.worker = w;
    return w;
  }

  /** One request to the worker (started if it is not), answered by the reply with its id. */
  send(req: Request, transfer: ArrayBuffer[] = []): Promise<Extract<InferenceReply, { ok: true }>> {
    if (this.draining) return Promise.reject(new CutoutError('processing_failed', 'The process is stopping'));
    const w = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      w.ref();
      w.postMessage({ ...req, id, threads: this.threads } satisfies InferenceRequest, transfer);
    });
  }

  /** Refuses new calls and resolves once none is in flight. */
  async drain(): Promise<void> {
    this.draining = true;
    await this.loaded;
    await settled(() => (this.worker ? this.pending.size : 0), Infinity);
  }

  /**
   * Stops the worker once the inferences in flight have returned: terminating the thread inside a
   * session run aborts the whole process (onnxruntime's native teardown).
   */
  async stop(): Promise<void> {
    await this.loaded;
    await settled(() => (this.worker ? this.pending.size : 0), Date.now() + STOP_WAIT_MS);
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate();
  }
}

interface SharedThread {
  thread: InferenceThread;
  leases: Set<ThreadLease>;
  key: string;
}

/** The threads of the process, by `threads:slot` (intra-op thread count, and which of a pipeline's workers). */
const threads = new Map<string, SharedThread>();

function sharedThread(count: number, slot: number): SharedThread {
  const key = `${count}:${slot}`;
  let shared = threads.get(key);
  if (!shared) {
    shared = { thread: new InferenceThread(count), leases: new Set(), key };
    threads.set(key, shared);
  }
  return shared;
}

/** A pipeline's hold on a shared thread: what it sends, and which model files it used. */
export class ThreadLease {
  private readonly modelPaths = new Set<string>();
  private calls = 0;
  private released: Promise<void> | null = null;

  constructor(private readonly shared: SharedThread) {
    shared.leases.add(this);
  }

  get threads(): number {
    return this.shared.thread.threads;
  }

  /** Model calls in flight on this lease's thread, from any pipeline (one with several workers sends to the least busy). */
  get busy(): number {
    return this.shared.thread.inFlight;
  }

  async send(req: Request, transfer: ArrayBuffer[] = []): Promise<Extract<InferenceReply, { ok: true }>> {
    if (this.released) throw new CutoutError('processing_failed', 'The inference of this remover is closed');
    this.modelPaths.add(req.modelPath);
    this.calls++;
    try {
      return await this.shared.thread.send(req, transfer);
    } finally {
      this.calls--;
    }
  }

  /**
   * Lets the thread go, once this lease's calls in flight have returned: the sessions no other
   * lease used are unloaded, and the thread stops when no lease is left. Idempotent.
   */
  release(): Promise<void> {
    this.released ??= (async () => {
      await settled(() => this.calls, Date.now() + STOP_WAIT_MS);
      const { leases, thread, key } = this.shared;
      leases.delete(this);
      if (leases.size === 0) {
        if (threads.get(key) === this.shared) threads.delete(key);
        await thread.stop();
        return;
      }
      const stillUsed = new Set([...leases].flatMap((lease) => [...lease.modelPaths]));
      for (const modelPath of this.modelPaths) {
        if (!stillUsed.has(modelPath)) await thread.send({ kind: 'unload', modelPath, inputName: '', outputName: '', arena: false }).catch(() => undefined);
      }
    })();
    return this.released;
  }
}

/**
 * A hold on a shared thread with `count` intra-op threads (started on the first request). `slot`:
 * which of a pipeline's inference workers (0 to workers - 1): pipelines of the same split share
 * slot for slot, so the worker threads of a process are at most the widest pipeline's.
 */
export function acquireInferenceThread(count = defaultThreadCount(), slot = 0): ThreadLease {
  return new ThreadLease(sharedThread(count, slot));
}

/** How many worker threads run now (tests, the bench's memory row). */
export function runningInferenceThreads(): number {
  return [...threads.values()].filter((shared) => shared.thread.started).length;
}

/**
 * Starts the default thread ahead of the first model call, so that its start and onnxruntime's
 * loading overlap the caller's own start-up: cli.ts calls it before the program's modules load.
 * The pipeline made later acquires this same thread. Unheld, it keeps nothing alive.
 */
export function startInferenceThread(): void {
  sharedThread(defaultThreadCount(), 0).thread.start();
}

/**
 * Refuses new model calls in every thread and resolves once every thread has loaded onnxruntime
 * and none has a call in flight. For a process that must exit early (the CLI when its reader
 * closes stdout): process.exit() while a worker is loading or running onnxruntime aborts the whole
 * process (exit 134, "terminate called after throwing an instance of 'Napi::Error'"), so the exit
 * waits for both.
 */
export async function drainInferenceThreads(): Promise<void> {
  await Promise.all([...threads.values()].map((shared) => shared.thread.drain()));
}
