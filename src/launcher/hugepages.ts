/**
 * Huge pages for the model's memory (issue 38): whether the `cutout` launcher (bin/cutout) starts
 * node again with glibc's tunable `glibc.malloc.hugetlb=1`, and what is in force in this process.
 *
 * glibc reads GLIBC_TUNABLES once, when the process starts, so a process cannot turn the tunable
 * on for itself: the launcher re-executes node with it set, or the user sets it before node starts
 * (the library's recipe, docs/library.md). With the tunable, malloc madvise()s its large blocks
 * (onnxruntime's arena among them) with MADV_HUGEPAGE, so the kernel can back them with 2 MB pages
 * where transparent huge pages are `madvise` (with `always` it does so anyway, and with `never` it
 * never does). docs/internals.md, "Huge pages", says why it is off by default on the machines
 * measured.
 *
 * This module imports nothing but node:fs: the launcher loads it before anything else, and a run
 * that does not need it must pay nothing. The decision is a pure function of facts that are read
 * lazily, cheapest first, so the checks stop at the first that settles it.
 */
import fs from 'node:fs';

/** Transparent huge pages as /sys/kernel/mm/transparent_hugepage/enabled says (the bracketed word). */
export type ThpMode = 'always' | 'madvise' | 'never';

/** What the decision reads. The thunks run only when the cheaper facts did not settle it. */
export interface HugePagesFacts {
  platform: string;
  /** CUTOUT_HUGEPAGES: 1/on/yes/true turns huge pages on, 0/off/no/false off; unset: the default. */
  setting: string | undefined;
  /** GLIBC_TUNABLES of this process, as it was when it started. */
  tunables: string | undefined;
  thp: () => ThpMode | null;
  /** glibc's version ("2.36"), or null for another C library (musl) or where unknown. */
  glibc: () => string | null;
}

export interface HugePagesDecision {
  /** Start node again with `env` (the launcher); false: run in this process as it is. */
  relaunch: boolean;
  /** Whether the model's memory is on huge pages in the process that runs cutout. */
  inForce: boolean;
  reason: string;
  /** GLIBC_TUNABLES for the relaunched process (only when relaunch). */
  tunables?: string;
}

/**
 * Off unless CUTOUT_HUGEPAGES=1: on the machines measured (KVM guests that report free memory to
 * the host) the first image got dearer with the tunable, not cheaper (docs/benchmarks.md, "Huge
 * pages"), and the relaunch adds a node start besides.
 */
export const HUGE_PAGES_DEFAULT = false;

/** The tunable's name, and the glibc that first has it (2.35). */
const TUNABLE = 'glibc.malloc.hugetlb';
const FIRST_GLIBC: [number, number] = [2, 35];

/** The value of `glibc.malloc.hugetlb` in a GLIBC_TUNABLES string (`a=1:b=2`), or null if absent. */
export function hugetlbTunable(tunables: string | undefined): string | null {
  if (!tunables) return null;
  for (const item of tunables.split(':')) {
    const eq = item.indexOf('=');
    if (eq > 0 && item.slice(0, eq) === TUNABLE) return item.slice(eq + 1);
  }
  return null;
}

/** CUTOUT_HUGEPAGES read as on, off, or null (unset or not understood: the default applies). */
export function parseSetting(value: string | undefined): boolean | null {
  const v = value?.trim().toLowerCase();
  if (v === '1' || v === 'on' || v === 'yes' || v === 'true') return true;
  if (v === '0' || v === 'off' || v === 'no' || v === 'false') return false;
  return null;
}

/** The mode in the text of /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never"). */
export function parseThpMode(text: string): ThpMode | null {
  const m = /\[(always|madvise|never)\]/.exec(text);
  return m ? (m[1] as ThpMode) : null;
}

/** Whether a glibc version string ("2.36", "2.35.1") has the hugetlb tunable. */
export function glibcHasTunable(version: string): boolean {
  const [major, minor] = version.split('.').map(Number);
  if (!Number.isInteger(major) || !Number.isInteger(minor)) return false;
  return major > FIRST_GLIBC[0] || (major === FIRST_GLIBC[0] && minor >= FIRST_GLIBC[1]);
}

/** What the system allows: null if huge pages can be had through the tunable, else why not. */
function unavailable(facts: HugePagesFacts): string | null {
  const thp = facts.thp();
  if (thp === null) return 'transparent huge pages are not available in this kernel';
  if (thp === 'never') return 'transparent huge pages are `never` on this system';
  const glibc = facts.glibc();
  if (glibc === null) return 'the C library is not glibc';
  if (!glibcHasTunable(glibc)) return `glibc ${glibc} has no ${TUNABLE} (2.35 and later)`;
  return null;
}

/**
 * The launcher's decision. Order: the opt-out, the platform, a tunable the user set already
 * (respected, never overridden), the setting or the default, then the system's facts.
 */
export function decideHugePages(facts: HugePagesFacts): HugePagesDecision {
  const setting = parseSetting(facts.setting);
  if (setting === false) return { relaunch: false, inForce: false, reason: 'CUTOUT_HUGEPAGES=0' };
  if (facts.platform !== 'linux') return { relaunch: false, inForce: false, reason: `not Linux (${facts.platform})` };
  const given = hugetlbTunable(facts.tunables);
  if (given !== null) return inForce(facts);
  const wanted = setting ?? HUGE_PAGES_DEFAULT;
  if (!wanted) return { relaunch: false, inForce: false, reason: 'the default; CUTOUT_HUGEPAGES=1 turns it on' };
  const thp = facts.thp();
  // With `always` the kernel already backs large allocations with huge pages: no relaunch needed.
  if (thp === 'always') return { relaunch: false, inForce: true, reason: 'transparent huge pages are `always` on this system' };
  const why = unavailable(facts);
  if (why) return { relaunch: false, inForce: false, reason: `${why}` };
  const tunables = facts.tunables ? `${facts.tunables}:${TUNABLE}=1` : `${TUNABLE}=1`;
  return { relaunch: true, inForce: true, reason: `${TUNABLE}=1 (CUTOUT_HUGEPAGES=1)`, tunables };
}

/**
 * What is in force in a process started with these facts, whoever set them (the launcher, the
 * user's GLIBC_TUNABLES, the kernel's `always`). Never relaunches.
 */
export function inForce(facts: HugePagesFacts): HugePagesDecision {
  if (facts.platform !== 'linux') return { relaunch: false, inForce: false, reason: `not Linux (${facts.platform})` };
  const given = hugetlbTunable(facts.tunables);
  const thp = facts.thp();
  if (thp === 'always') return { relaunch: false, inForce: true, reason: 'transparent huge pages are `always` on this system' };
  if (given === null || given === '0') {
    const setting = parseSetting(facts.setting);
    // Asked for but not set: the system did not allow it, or no launcher ran (the library's case).
    const asked = () => unavailable(facts) ?? 'CUTOUT_HUGEPAGES=1 reached no launcher (bin/cutout); for a script of your own see docs/library.md';
    const why = setting === false ? 'CUTOUT_HUGEPAGES=0' : given === '0' ? `${TUNABLE}=0 in GLIBC_TUNABLES` : setting === true ? asked() : 'the default; CUTOUT_HUGEPAGES=1 turns it on';
    return { relaunch: false, inForce: false, reason: `${why}` };
  }
  const why = unavailable(facts);
  if (why) return { relaunch: false, inForce: false, reason: `${TUNABLE}=${given} is set, but ${why}` };
  return { relaunch: false, inForce: true, reason: `${TUNABLE}=${given} in GLIBC_TUNABLES` };
}

/** Reads the kernel's THP mode; null where the file is missing (not Linux, or no THP). */
export function readThpMode(): ThpMode | null {
  try {
    return parseThpMode(fs.readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8'));
  } catch {
    return null;
  }
}

/** glibc's version at run time, from node's diagnostic report header (about 4 ms); null on musl. */
export function readGlibcVersion(): string | null {
  try {
    const report = process.report as unknown as { excludeNetwork?: boolean; getReport(): object };
    report.excludeNetwork = true;
    const header = (report.getReport() as { header?: { glibcVersionRuntime?: string } }).header;
    return header?.glibcVersionRuntime ?? null;
  } catch {
    return null;
  }
}

/** The facts of this process. */
export function processFacts(env: NodeJS.ProcessEnv = process.env): HugePagesFacts {
  return { platform: process.platform, setting: env.CUTOUT_HUGEPAGES, tunables: env.GLIBC_TUNABLES, thp: readThpMode, glibc: readGlibcVersion };
}

/** What is in force in this process, for `cutout models list` and the servers' start lines. */
export function hugePagesStatus(): { in_force: boolean; reason: string } {
  const d = inForce(processFacts());
  return { in_force: d.inForce, reason: d.reason };
}
