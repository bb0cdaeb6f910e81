/**
 * The inference worker thread of the process: started once, it holds the sessions and runs one
 * inference at a time (inference-worker.ts). Apart from model.ts, and importing next to nothing,
 * so that the CLI can start the thread before anything else of the program loads (cold start,
 * README): the thread's start and onnxruntime's loading are the longer branch before the first
 * inference.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { CutoutError } from '../errors.js';
import type { InferenceReply, InferenceRequest } from './inference-worker.js';

/** Intra-op threads: every core (measured fastest on two cores). Override with CUTOUT_THREADS. */
function threadCount(): number {
  const fromEnv = Number(process.env.CUTOUT_THREADS);
  if (Number.isInteger(fromEnv) && fromEnv > 0) return fromEnv;
  return Math.max(1, os.availableParallelism?.() ?? os.cpus().length);
}

type Pending = { resolve: (r: Extract<InferenceReply, { ok: true }>) => void; reject: (e: Error) => void };

let worker: Worker | null = null;
let nextId = 1;
const pending = new Map<number, Pending>();

function getWorker(): Worker {
  if (worker) return worker;
  const w = new Worker(new URL('./inference-worker.js', import.meta.url));
  w.on('message', (reply: InferenceReply) => {
    const p = pending.get(reply.id);
    if (!p) return;
    pending.delete(reply.id);
    if (pending.size === 0) w.unref();
    if (reply.ok) p.resolve(reply);
    else p.reject(new CutoutError('processing_failed', `Model error: ${reply.message}`));
  });
  const failAll = (err: Error) => {
    worker = null;
    for (const p of pending.values()) p.reject(new CutoutError('processing_failed', `Inference worker stopped: ${err.message}`));
    pending.clear();
  };
  w.on('error', failAll);
  w.on('exit', (code) => failAll(new Error(`exit code ${code}`)));
  // An idle worker must not keep a CLI process alive.
  w.unref();
  worker = w;
  return w;
}

/**
 * Starts the worker thread ahead of the first model call, so that its start and onnxruntime's
 * loading overlap the caller's own start-up. model.ts's startInferenceWorker does it unless the
 * model runs upstream; cli.ts calls this directly, before the program's modules load.
 */
export function startInferenceThread(): void {
  getWorker();
}

/** Set by drainModels: the process is about to exit, no new model call starts. */
let draining = false;

/**
 * Refuses new model calls and resolves once none is in flight in the worker (at once if none).
 * For a process that must exit early (the CLI when its reader closes stdout): process.exit()
 * while the worker is inside onnxruntime aborts the whole process (exit 134, "terminate called
 * after throwing an instance of 'Napi::Error'"), so the exit waits for the call to return.
 */
export async function drainModels(): Promise<void> {
  draining = true;
  await callsInFlightReturned(Infinity);
}

/** Resolves once no model call is in flight in the worker, or at `until` (epoch ms). */
async function callsInFlightReturned(until: number): Promise<void> {
  while (worker && pending.size > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** One request to the worker thread (started if it is not), answered by the reply with its id. */
export function send(req: Omit<InferenceRequest, 'id' | 'threads'>, transfer: ArrayBuffer[] = []): Promise<Extract<InferenceReply, { ok: true }>> {
  if (draining) return Promise.reject(new CutoutError('processing_failed', 'The process is stopping'));
  const w = getWorker();
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    w.ref();
    w.postMessage({ ...req, id, threads: threadCount() } satisfies InferenceRequest, transfer);
  });
}

/** How long stopModels waits for inferences in flight before it stops the worker anyway. */
const STOP_WAIT_MS = 60_000;

/**
 * Stops the worker (tests, clean shutdown), once the inferences in flight have returned:
 * terminating the thread inside a session run aborts the whole process (onnxruntime's native
 * teardown), as a server's stop after its jobs' grace period would.
 */
export async function stopModels(): Promise<void> {
  await callsInFlightReturned(Date.now() + STOP_WAIT_MS);
  const w = worker;
  worker = null;
  if (w) await w.terminate();
}
