/**
 * What this process may use of the machine. How many cores: the machine's (Node's availableParallelism, which on Node 20
 * counts the CPUs the process may run on but not a container's CPU limit) capped by the cgroup's
 * CPU quota, so that a pod limited to 2 CPUs on a 64-core node runs 2 intra-op threads and sizes
 * its workers for 2, not 64 (issue 51). The quota is rounded down, at least 1, as Go's
 * automaxprocs does: threads beyond the quota are throttled by the kernel, not run. How much
 * memory: the machine's, capped by the cgroup's limit (process.constrainedMemory).
 *
 * Imports nothing of the program: inference-thread.ts reads it before anything else loads.
 */
import fs from 'node:fs';
import os from 'node:os';

/** The CPU quota of the cgroup at `root` in CPUs (cgroup v2 cpu.max, else v1's cfs files); null without one. */
export function cgroupCpuLimit(root = '/sys/fs/cgroup'): number | null {
  const read = (file: string): string | null => {
    try {
      return fs.readFileSync(`${root}/${file}`, 'utf8').trim();
    } catch {
      return null;
    }
  };
  const v2 = read('cpu.max'); // "max 100000" or "150000 100000"
  if (v2 !== null) {
    const [quota, period] = v2.split(/\s+/);
    return quotaInCpus(quota, period);
  }
  return quotaInCpus(read('cpu/cpu.cfs_quota_us') ?? read('cpu.cfs_quota_us'), read('cpu/cpu.cfs_period_us') ?? read('cpu.cfs_period_us'));
}

function quotaInCpus(quota: string | null | undefined, period: string | null | undefined): number | null {
  const q = Number(quota);
  const p = Number(period);
  // "max" (v2) and -1 (v1) say no limit.
  if (!Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return null;
  return q / p;
}

/** The cores to size threads and workers by: the machine's, capped by the cgroup's quota. */
export function usableCores(root?: string): number {
  const machine = Math.max(1, os.availableParallelism?.() ?? os.cpus().length);
  const limit = cgroupCpuLimit(root);
  return limit === null ? machine : Math.max(1, Math.min(machine, Math.floor(limit)));
}

/** The memory to size workers by: the machine's, capped by the cgroup's limit when there is one. */
export function usableMemory(): number {
  const total = os.totalmem();
  // 0 when unknown; a huge number (2^63 and the like) when the cgroup sets none.
  const limit = process.constrainedMemory?.() ?? 0;
  return limit > 0 && limit < total ? limit : total;
}
