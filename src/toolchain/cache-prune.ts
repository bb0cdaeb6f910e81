/**
 * Files of a model's cache that no longer serve: copies made by an earlier revision of the
 * rewrites (weights.ts RUNNABLE_REVISION), int8 copies of an earlier calibration or quantizer
 * (their build key), onnxruntime's optimised copies (folders) and sidecars of those, optimised
 * copies in the earlier one-file layout, and temporary files or folders a killed process left.
 * Derived files are rebuilt when missing, so pruning never loses anything; without it every
 * upgrade that renames them leaves a few hundred MB behind. `cutout models pull`
 * (run at install) prunes; nothing else does, so two versions sharing one cache do not take
 * each other's files at every run.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { ModelManifest } from './manifest.js';

/** A temporary file older than this was left by a process that died (a live one renames within seconds). */
const STALE_TEMP_MS = 3_600_000;

/**
 * The names, among `names` in the cache folder, that are stale for `manifest` (pure, for tests).
 * `prefix`: `<name>-<sha16>`; `revision`: the current rewrite revision, or null when the model is
 * run as assembled (no conversion, so its variants carry no revision); `int8Key`: the current
 * int8 build key at an input side (null: the model's own; a side can have calibration data of
 * its own). Files of other models or other weights are never named.
 */
export function staleCacheNames(names: string[], prefix: string, revision: string | null, int8Key: (side: number | null) => string, tempAgeMs: (name: string) => number): string[] {
  const stale: string[] = [];
  for (const name of names) {
    if (!name.startsWith(`${prefix}.`)) continue;
    if (/\.\d+\.tmp$/.test(name)) {
      if (tempAgeMs(name) > STALE_TEMP_MS) stale.push(name);
      continue;
    }
    // onnxruntime's optimised copy as one file: the layout before its weights moved to a mapped file of their own.
    if (/\.ort-.+?-[0-9a-f]+\.optimized\.onnx$/.test(name)) { stale.push(name); continue; }
    // The file this one belongs to: a sidecar's or an optimised copy's (a folder) model file.
    const base = name.replace(/\.sha256$/, '').replace(/\.ort-.+?-[0-9a-f]+\.optimized$/, '.onnx');
    const rest = base.slice(prefix.length + 1); // after "<prefix>."
    if (rest === 'onnx') continue; // the assembled weights themselves
    const int8 = /^(.*?)int8-([0-9a-f]+)\.onnx$/.exec(rest);
    const fp32Part = int8 ? int8[1] : rest; // "" (native int8), "o1.side512." or "o1.fp16-to-fp32.onnx"
    const side = /side(\d+)\.$/.exec(fp32Part)?.[1];
    if (int8 && int8[2] !== int8Key(side ? Number(side) : null)) { stale.push(name); continue; }
    if (revision !== null && fp32Part !== '' && !fp32Part.startsWith(`${revision}.`)) stale.push(name);
  }
  return stale;
}

/** Removes the stale files of `manifest` from `cacheDir`; returns their names. Best effort. */
export function pruneModelCache(manifest: ModelManifest, cacheDir: string, revision: string, int8Key: (side: number | null) => string): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(cacheDir);
  } catch {
    return [];
  }
  const prefix = `${manifest.name}-${manifest.sha256.slice(0, 16)}`;
  const ageMs = (name: string) => {
    try {
      return Date.now() - fs.statSync(path.join(cacheDir, name)).mtimeMs;
    } catch {
      return 0;
    }
  };
  const removed: string[] = [];
  for (const name of staleCacheNames(names, prefix, manifest.convert ? revision : null, int8Key, ageMs)) {
    try {
      fs.rmSync(path.join(cacheDir, name), { recursive: true, force: true }); // optimised copies are folders
      removed.push(name);
    } catch {
      // A read-only cache (a package folder of another user): left as it is.
    }
  }
  return removed;
}
