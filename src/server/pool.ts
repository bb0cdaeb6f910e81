/**
 * A bounded pool of inference slots shared by the sync route and (next issue) the job workers.
 * At most `size` tasks run at once; the rest wait in FIFO order. A waiting task leaves the queue
 * when its signal aborts; a running one keeps its slot until it really ends, because the model
 * thread is still busy even when the caller has given up (a sync timeout).
 */
import { CutoutError } from '../errors.js';

interface Waiter {
  start: () => void;
}

export interface PoolRunOptions {
  /** Abort while waiting for a slot: the task never starts and the promise rejects with the reason. */
  signal?: AbortSignal;
  /** Refuse with gpu_unavailable when this many tasks already wait (the /jobs queue limit). */
  maxQueued?: number;
}

export class WorkPool {
  private running = 0;
  private readonly waiting: Waiter[] = [];
  private closing = false;
  private idleResolvers: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`WorkPool size must be a positive integer, got ${size}`);
  }

  /** Tasks waiting for a slot, and tasks holding one. */
  stats(): { queued: number; processing: number } {
    return { queued: this.waiting.length, processing: this.running };
  }

  /** Runs `task` in a slot, waiting for one if all are busy. */
  run<T>(task: () => Promise<T>, options: PoolRunOptions = {}): Promise<T> {
    const { signal, maxQueued } = options;
    if (this.closing) return Promise.reject(new CutoutError('gpu_unavailable', 'The server is shutting down.', { headers: { 'Retry-After': '5' } }));
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.running < this.size) return this.execute(task);
    if (maxQueued !== undefined && this.waiting.length >= maxQueued) {
      return Promise.reject(new CutoutError('gpu_unavailable', undefined, { headers: { 'Retry-After': '5' } }));
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal?.reason);
        this.notifyIdle();
      };
      const waiter: Waiter = {
        start: () => {
          signal?.removeEventListener('abort', onAbort);
          this.execute(task).then(resolve, reject);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  private async execute<T>(task: () => Promise<T>): Promise<T> {
    this.running++;
    try {
      return await task();
    } finally {
      this.running--;
      const next = this.waiting.shift();
      if (next) next.start();
      else this.notifyIdle();
    }
  }

  private notifyIdle(): void {
    if (this.running === 0 && this.waiting.length === 0) {
      for (const resolve of this.idleResolvers.splice(0)) resolve();
    }
  }

  /** Refuses new tasks and resolves when every started or waiting task has ended. */
  drain(): Promise<void> {
    this.closing = true;
    if (this.running === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleResolvers.push(resolve));
  }
}
