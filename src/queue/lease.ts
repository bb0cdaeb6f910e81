/**
 * Keeps a running job's lease: renewed every third of it, so two renewals may be slow or lost
 * before it runs out. A renewal that finds the lease gone (it ran out and another server took the
 * job) calls `onLost`: the run can no longer commit, so it is stopped rather than finished in vain.
 * A renewal that fails (the store unreachable) is simply tried again at the next tick.
 */
import type { JobStore } from '../store/jobs.js';

/** What keeping a lease needs of the store. */
export type LeaseStore = { readonly jobs: Pick<JobStore, 'renewLease'> };

/** Starts renewing; returns the function that stops it. */
export function keepLease(store: LeaseStore, job: { id: string; attempt: number }, leaseMs: number, onLost: () => void): () => void {
  let stopped = false;
  const timer = setInterval(() => {
    void store.jobs.renewLease(job.id, job.attempt, leaseMs).then((held) => {
      if (!held && !stopped) onLost();
    }, () => undefined);
  }, Math.floor(leaseMs / 3));
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
