/**
 * Notices that this process was orphaned: the process that started it (npx's npm exec, a shell
 * that ran it in the background, a test runner) is gone and it was re-parented to init or a
 * subreaper. `npx cutout serve` is npm exec, then sh, then node: a SIGTERM to npx ends npm and sh
 * but not node, which kept serving with nobody to stop it (issue 29). Node has no parent-death
 * signal, and its `process.ppid` is read once at start, so the parent is polled.
 */
import fs from 'node:fs';

/** This process's parent pid as the kernel sees it now (Linux: /proc), or null where unknown. */
export function currentParentPid(): number | null {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(ppid) ? ppid : null;
  } catch {
    return null;
  }
}

function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * Calls `onOrphaned` once, within about `everyMs`, when the parent this process started with is
 * no longer its parent (where /proc is missing: when that pid no longer exists). A process started
 * by init itself (parent pid 1: a systemd system service, a container's entry point) has no parent
 * to lose, and is not watched. The timer does not keep the process alive. Returns a stop function.
 */
export function watchParent(onOrphaned: () => void, everyMs = 1000): () => void {
  const parent = currentParentPid() ?? process.ppid;
  if (parent <= 1) return () => undefined;
  const timer = setInterval(() => {
    const now = currentParentPid();
    if (now === null ? isGone(parent) : now !== parent) {
      clearInterval(timer);
      onOrphaned();
    }
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
