/**
 * How a machine's cores are split between inference workers (threads, each with its own session,
 * running one inference at a time) and the intra-op threads of each session. A pure rule, so that
 * `serve`, `model-server` and the CLI's folders agree, and tested on its own.
 *
 * Why split at all: one session given every core of a large machine does not run an image
 * proportionally faster. onnxruntime's own reports say so: 8 cores cut a transformer's run only
 * to 50 % of one core's (microsoft/onnxruntime#6639), 32 cores ran no faster than 16
 * (microsoft/onnxruntime#9096), and a 3D U-Net got slower as cores were added (#5193); its
 * threading guide sets the default intra-op pool to the physical cores and recommends
 * experimenting with fewer threads and more sessions for throughput
 * (onnxruntime.ai/docs/performance/tune-performance/threading.html). ISNet is a convolutional
 * U-Net of the same kind. Two workers of half the threads keep both sets of cores busy through
 * the serial parts of a run (the small deep layers, the resizes), where one wide session idles.
 *
 * The rule: one worker up to CORES_PER_WORKER cores, then one per CORES_PER_WORKER cores, never
 * more than a quarter of the memory allows (each worker holds its own session and arena:
 * SESSION_BYTES, measured here). Measured here (2 cores): 1x2 against 2x1 in docs/benchmarks.md.
 */

/** Cores one session is given before another session pays more than more threads. */
export const CORES_PER_WORKER = 8;

/**
 * Peak memory one more worker adds: its session of the fp32 model at 1024 px with the memory
 * arena, after a run (measured: `node dist-bench/split.js --memory`).
 */
export const SESSION_BYTES = 700e6;

export interface InferenceSplit {
  workers: number;
  threads: number;
}

export function inferenceSplit(cores: number, memoryBytes: number, sessionBytes = SESSION_BYTES): InferenceSplit {
  const c = Math.max(1, Math.floor(cores));
  if (c <= CORES_PER_WORKER) return { workers: 1, threads: c };
  const byCores = Math.floor(c / CORES_PER_WORKER);
  const byMemory = Math.max(1, Math.floor((memoryBytes * 0.25) / sessionBytes));
  const workers = Math.min(byCores, byMemory);
  return { workers, threads: Math.floor(c / workers) };
}
