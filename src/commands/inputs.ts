/**
 * What `cutout remove` works on: files, directories (optionally recursive), glob patterns that
 * cutout expands itself (so quoted globs behave the same on every shell), and `-` for stdin;
 * and where each output goes.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Format } from '../options.js';
import { fsReason } from '../errors.js';
import { UsageError } from './usage-error.js';

/** Extensions picked up when scanning a directory or a glob (explicit files are always tried). */
export const IMAGE_EXTENSIONS = ['.jpg', '.jpeg', '.jpe', '.jfif', '.png', '.apng', '.webp', '.gif', '.bmp', '.tif', '.tiff', '.avif', '.heic', '.heif'];
/**
 * Our own outputs (`.cutout.` and, with --mask, `.mask.`, in a format cutout writes) are never
 * inputs of a folder scan, and a named one is skipped unless --include-outputs (docs/cli.md):
 * re-running on a folder, or on a shell's `*.jpg`, must not cut out cutouts.
 */
const OUTPUT_MARK = /\.(cutout|mask)\.(png|webp|jpe?g|zip)$/i;

/** Whether a file's name is one cutout gives its outputs (`x.cutout.png`, `x.mask.png`). */
export function isOwnOutputName(name: string): boolean {
  return OUTPUT_MARK.test(name);
}

export interface InputItem {
  /** Path of the file, or '-' for stdin. */
  path: string;
  /** Directory the relative output layout is computed from (the folder or glob base given). */
  root: string;
}

export interface ExpandedInputs {
  items: InputItem[];
  /** Arguments that matched nothing (a missing path is still an item, so it fails with its own line). */
  unmatched: string[];
  /** Folders that could not be read (permissions): each fails on its own line, the rest goes on. */
  unreadable: { path: string; message: string }[];
  /** Named files that look like cutout's own outputs, left out (ExpandOptions.includeOutputs). */
  ownOutputs: string[];
}

export interface ExpandOptions {
  recursive: boolean;
  /**
   * The output folder: never scanned, and no file under it is taken from a folder or a glob,
   * even when it lies inside an input folder (`cutout in -o in/out --recursive`).
   */
  outputDir?: string | null;
  /** Take named files that look like cutout's outputs (`x.cutout.png`) as inputs too. */
  includeOutputs?: boolean;
}

export const isGlob = (s: string) => /[*?[\]{}]/.test(s);

/** Whether a folder scan or a glob takes this name: an image's extension, and not one of our outputs. */
export function isImageName(name: string): boolean {
  const lower = name.toLowerCase();
  return IMAGE_EXTENSIONS.some((e) => lower.endsWith(e)) && !OUTPUT_MARK.test(lower);
}

/**
 * The output folder when it lies strictly inside `root` (an input folder or a glob's base), else
 * null: only then is there something to leave out. An input folder is never left out itself:
 * `cutout photos -o photos` writes `photos/x.cutout.png` beside the photos (isImageName leaves
 * those names out), and `cutout in/photos -o in` scans all of in/photos.
 */
export function outputDirBelow(root: string, outputDir: string | null | undefined): string | null {
  if (!outputDir) return null;
  return isWithin(outputDir, root) && path.resolve(outputDir) !== path.resolve(root) ? outputDir : null;
}

/** Whether `dir` is `p` or one of its parents (both resolved). */
export function isWithin(p: string, dir: string): boolean {
  const rel = path.relative(path.resolve(dir), path.resolve(p));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * A symlink to a file is scanned like the file. Symlinked directories are not followed (as fd and
 * ripgrep do by default), so a link loop cannot make a scan endless.
 */
function isFileTarget(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false; // a dangling link
  }
}

/** Images in `dir` (deeper when `recursive`), never under `skip` (the output folder, outputDirBelow). */
function scanDir(dir: string, opts: { recursive: boolean; skip: string | null }, out: string[], unreadable: ExpandedInputs['unreadable']): void {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
  } catch (err) {
    unreadable.push({ path: dir, message: `Cannot read folder: ${fsReason(err)}` });
    return;
  }
  for (const e of entries) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (opts.recursive && !e.name.startsWith('.') && !(opts.skip && isWithin(full, opts.skip))) scanDir(full, opts, out, unreadable);
    } else if ((e.isFile() || (e.isSymbolicLink() && isFileTarget(full))) && isImageName(e.name)) out.push(full);
  }
}

/** The fixed directory part of a glob ("photos/**\/*.jpg" -> "photos"). */
export function globBase(pattern: string): string {
  const parts = pattern.split(/[\\/]/);
  const fixed: string[] = [];
  for (const p of parts) {
    if (isGlob(p)) break;
    fixed.push(p);
  }
  return fixed.length ? fixed.join(path.sep) || path.sep : '.';
}

function realOrResolved(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p); // missing: it fails on its own line later
  }
}

export async function expandInputs(args: string[], opts: ExpandOptions): Promise<ExpandedInputs> {
  const items: InputItem[] = [];
  const unmatched: string[] = [];
  const unreadable: ExpandedInputs['unreadable'] = [];
  const ownOutputs: string[] = [];
  const seen = new Set<string>();
  // One file is one item, under the first path that reaches it: a glob through a symlink to `..`
  // or a link beside its target must not run the same image twice.
  const add = (p: string, root: string) => {
    const key = p === '-' ? '-' : realOrResolved(p);
    if (seen.has(key)) return;
    seen.add(key);
    items.push({ path: p, root });
  };
  for (const arg of args) {
    if (arg === '-') {
      add('-', '.');
      continue;
    }
    let stat: fs.Stats | null = null;
    try {
      stat = fs.statSync(arg);
    } catch {
      stat = null;
    }
    if (stat?.isDirectory()) {
      const found: string[] = [];
      const before = unreadable.length;
      scanDir(arg, { recursive: opts.recursive, skip: outputDirBelow(arg, opts.outputDir) }, found, unreadable);
      if (!found.length && unreadable.length === before) unmatched.push(arg);
      for (const f of found) add(f, arg);
    } else if (!stat && isGlob(arg)) {
      const { glob } = await import('tinyglobby');
      const skip = outputDirBelow(globBase(arg), opts.outputDir);
      const found = (await glob(arg, { onlyFiles: true, dot: false, expandDirectories: false }))
        .filter((f) => isImageName(path.basename(f)) && !(skip && isWithin(f, skip))).sort();
      if (!found.length) unmatched.push(arg);
      for (const f of found) add(f, globBase(arg));
    } else if (stat?.isFile() && !opts.includeOutputs && isOwnOutputName(path.basename(arg))) {
      // A shell's `*.jpg` on a rerun names yesterday's `x.cutout.jpg` too: not a cutout of a cutout.
      ownOutputs.push(arg);
    } else {
      // A plain path, present or not: a missing file fails on its own line, the others go on.
      add(arg, path.dirname(arg));
    }
  }
  return { items, unmatched, unreadable, ownOutputs };
}

export const FORMAT_BY_EXTENSION: Readonly<Record<string, Format | 'zip'>> = { '.png': 'png', '.webp': 'webp', '.jpg': 'jpg', '.jpeg': 'jpg', '.gif': 'gif', '.zip': 'zip' };

/**
 * An input's own output format when it is an animation and the run named no format: animated
 * WebP (the pipeline writes the same), so that its name says what it holds. Read from the file's
 * head (an APNG's acTL, a WebP's animation flag) or, for a GIF, its frame count; null for a still,
 * an unreadable file (its own error comes when it runs), or a run with a format of its own.
 */
export async function animationFormatOf(file: string, options: { formatByDefault?: true; animation?: 'keep' | 'first'; mask?: boolean }): Promise<Format | null> {
  if (!options.formatByDefault || options.animation === 'first' || file === '-') return null;
  const ext = path.extname(file).toLowerCase();
  if (!['.gif', '.webp', '.png', '.apng'].includes(ext)) return null;
  try {
    const bytes = await fs.promises.readFile(file);
    const { openImage } = await import('../pipeline/decode.js');
    return (await openImage(bytes)).frames > 1 ? 'webp' : null;
  } catch {
    return null;
  }
}

export interface OutputPlan {
  /** '-' means stdout. */
  kind: 'next-to-input' | 'directory' | 'file' | 'stdout';
  path: string | null;
}

/**
 * How `--out` is read: `-` is stdout; an existing directory is a directory; a path with a png,
 * webp, jpg or gif extension is a file (then there must be one input); a path with another image
 * extension (bmp, tif, avif, heic) is refused, since cutout cannot write it; anything else is a
 * directory, created when missing.
 */
export function planOutput(out: string | undefined, inputCount: number): OutputPlan {
  if (out === undefined) return { kind: 'next-to-input', path: null };
  if (out === '-') return { kind: 'stdout', path: null };
  if (fs.existsSync(out) && fs.statSync(out).isDirectory()) return { kind: 'directory', path: out };
  const ext = path.extname(out).toLowerCase();
  if (ext in FORMAT_BY_EXTENSION) {
    if (inputCount === 1) return { kind: 'file', path: out };
    throw new UsageError(`--out ${out} names one file, but ${inputCount} inputs were given; give a directory`);
  }
  if (IMAGE_EXTENSIONS.includes(ext)) throw new UsageError(`--out ${out}: cutout writes png, webp, jpg or gif, not ${ext.slice(1)}`);
  return { kind: 'directory', path: out };
}

/** The output path of one input (null for stdout). */
export function outputPathFor(item: InputItem, plan: OutputPlan, format: Format | 'zip', suffix = '.cutout'): string | null {
  const ext = `.${format}`;
  if (plan.kind === 'stdout') return null;
  if (plan.kind === 'file') return plan.path;
  const base = item.path === '-' ? 'stdin' : path.basename(item.path, path.extname(item.path));
  const name = `${base}${suffix}${ext}`;
  if (plan.kind === 'next-to-input') return item.path === '-' ? name : path.join(path.dirname(item.path), name);
  const rel = item.path === '-' ? '' : path.relative(item.root, path.dirname(item.path));
  const safeRel = rel.startsWith('..') || path.isAbsolute(rel) ? '' : rel;
  return path.join(plan.path!, safeRel, name);
}
