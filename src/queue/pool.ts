/**
 * A bounded pool of inference slots shared by the sync route and the job workers. At most `size`
 * tasks run at once; the rest wait. A waiting task leaves the queue when its signal aborts; a
 * running one keeps its slot until it really ends, because the model thread is still busy even
 * when the caller has given up (a sync timeout).
 *
 * Fair policy between the two kinds of task, applied each time a slot frees while both wait:
 * a waiting sync request gets the slot first (someone holds a connection open for it), except
 * that after `syncBurst` (default 2) sync grants in a row a waiting job gets it. So sync requests
 * never queue behind the job backlog, at most one job start in `syncBurst + 1` goes ahead of them,
 * and jobs keep at least one slot grant in every `syncBurst + 1` however heavy the sync traffic:
 * no starvation either way. Within a kind the order is FIFO. A free slot is taken at once by
 * whoever asks.
 */
import { CutoutError } from '../errors.js';
import { LIMITS } from '../limits.js';

export type TaskKind = 'sync' | 'job';

interface Waiter {
  start: () => void;
}

export interface PoolRunOptions {
  /** Abort while waiting for a slot: the task never starts and the promise rejects with the reason. */
  signal?: AbortSignal;
  /** Refuse with gpu_unavailable when this many tasks already wait. */
  maxQueued?: number;
  /** Which side of the fair policy the task is on; default `sync`. */
  kind?: TaskKind;
}

export interface PoolStats {
  /** Tasks waiting for a slot, of both kinds. */
  queued: number;
  /** Tasks holding a slot, of both kinds. */
  processing: number;
  sync: { waiting: number; running: number };
  jobs: { waiting: number; running: number };
}

/**
 * The fair policy as a pure decision: which kind gets a freed slot, given who waits and how many
 * sync grants in a row were made while jobs waited. Returns the kind and the new streak.
 */
export function chooseNext(syncWaiting: number, jobsWaiting: number, syncStreak: number, syncBurst: number): { kind: TaskKind | null; streak: number } {
  if (syncWaiting > 0 && jobsWaiting > 0) {
    if (syncStreak >= syncBurst) return { kind: 'job', streak: 0 };
    return { kind: 'sync', streak: syncStreak + 1 };
  }
  if (syncWaiting > 0) return { kind: 'sync', streak: syncStreak };
  if (jobsWaiting > 0) return { kind: 'job', streak: 0 };
  return { kind: null, streak: syncStreak };
}

export class WorkPool {
  private readonly running: Record<TaskKind, number> = { sync: 0, job: 0 };
  private readonly waiting: Record<TaskKind, Waiter[]> = { sync: [], job: [] };
  private syncStreak = 0;
  private closing = false;
  private idleResolvers: (() => void)[] = [];

  constructor(readonly size: number, readonly syncBurst = 2) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`WorkPool size must be a positive integer, got ${size}`);
    if (!Number.isInteger(syncBurst) || syncBurst < 0) throw new RangeError(`WorkPool syncBurst must be a non-negative integer, got ${syncBurst}`);
  }

  private get busy(): number {
    return this.running.sync + this.running.job;
  }

  private get queuedCount(): number {
    return this.waiting.sync.length + this.waiting.job.length;
  }

  stats(): PoolStats {
    return {
      queued: this.queuedCount,
      processing: this.busy,
      sync: { waiting: this.waiting.sync.length, running: this.running.sync },
      jobs: { waiting: this.waiting.job.length, running: this.running.job },
    };
  }

  /** True once drain() was called: new tasks are refused. */
  get draining(): boolean {
    return this.closing;
  }

  /** Runs `task` in a slot, waiting for one if all are busy. */
  run<T>(task: () => Promise<T>, options: PoolRunOptions = {}): Promise<T> {
    const { signal, maxQueued } = options;
    const kind = options.kind ?? 'sync';
    const retryAfter = { 'Retry-After': String(LIMITS.busyRetryAfterSeconds) };
    if (this.closing) return Promise.reject(new CutoutError('gpu_unavailable', 'The server is shutting down.', { headers: retryAfter, reason: 'shutting_down' }));
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.busy < this.size) return this.execute(kind, task);
    if (maxQueued !== undefined && this.queuedCount >= maxQueued) {
      return Promise.reject(new CutoutError('gpu_unavailable', undefined, { headers: retryAfter, reason: 'queue_full' }));
    }
    return new Promise<T>((resolve, reject) => {
      const queue = this.waiting[kind];
      const onAbort = () => {
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
        reject(signal?.reason);
        this.notifyIdle();
      };
      const waiter: Waiter = {
        start: () => {
          signal?.removeEventListener('abort', onAbort);
          this.execute(kind, task).then(resolve, reject);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
    });
  }

  private async execute<T>(kind: TaskKind, task: () => Promise<T>): Promise<T> {
    this.running[kind]++;
    try {
      return await task();
    } finally {
      this.running[kind]--;
      const { kind: nextKind, streak } = chooseNext(this.waiting.sync.length, this.waiting.job.length, this.syncStreak, this.syncBurst);
      this.syncStreak = streak;
      const next = nextKind ? this.waiting[nextKind].shift() : undefined;
      if (next) next.start();
      else this.notifyIdle();
    }
  }

  private notifyIdle(): void {
    if (this.busy === 0 && this.queuedCount === 0) {
      for (const resolve of this.idleResolvers.splice(0)) resolve();
    }
  }

  /** Refuses new tasks and resolves when every started or waiting task has ended. */
  drain(): Promise<void> {
    this.closing = true;
    if (this.busy === 0 && this.queuedCount === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleResolvers.push(resolve));
  }
}
