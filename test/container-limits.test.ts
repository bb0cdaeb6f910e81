/**
 * Threads and workers follow a container's CPU limit, not the node's cores (issue 51): the cgroup's
 * quota read from cgroup v2's cpu.max or v1's cfs files, rounded down, at least 1.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cgroupCpuLimit, usableCores, usableMemory } from '../src/container-limits.js';

function cgroup(t: { testdir: () => string }, files: Record<string, string>): string {
  const root = t.testdir();
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), `${text}\n`);
  }
  return root;
}

const machine = Math.max(1, os.availableParallelism());

t.test('cgroup v2: cpu.max', async (t) => {
  t.equal(cgroupCpuLimit(cgroup(t, { 'cpu.max': 'max 100000' })), null, '"max": no limit');
  t.equal(cgroupCpuLimit(cgroup(t, { 'cpu.max': '150000 100000' })), 1.5, '1.5 CPUs');
  t.equal(usableCores(cgroup(t, { 'cpu.max': 'max 100000' })), machine, 'no limit: the machine');
  t.equal(usableCores(cgroup(t, { 'cpu.max': '150000 100000' })), 1, '1.5 CPUs: 1 thread (rounded down)');
  t.equal(usableCores(cgroup(t, { 'cpu.max': '50000 100000' })), 1, 'half a CPU: still 1');
  t.equal(usableCores(cgroup(t, { 'cpu.max': `${(machine + 8) * 100000} 100000` })), machine, 'a limit above the machine: the machine');
});

t.test('cgroup v1: cpu.cfs_quota_us and cpu.cfs_period_us', async (t) => {
  t.equal(cgroupCpuLimit(cgroup(t, { 'cpu/cpu.cfs_quota_us': '-1', 'cpu/cpu.cfs_period_us': '100000' })), null, '-1: no limit');
  t.equal(cgroupCpuLimit(cgroup(t, { 'cpu/cpu.cfs_quota_us': '200000', 'cpu/cpu.cfs_period_us': '100000' })), 2, '2 CPUs');
});

t.test('no cgroup files: the machine', async (t) => {
  t.equal(cgroupCpuLimit(t.testdir()), null);
  t.equal(usableCores(t.testdir()), machine);
  t.ok(usableMemory() > 0 && usableMemory() <= os.totalmem(), 'memory: at most the machine\'s');
});
