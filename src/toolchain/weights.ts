/**
 * Brings a manifest's weights to one verified .onnx file on disk, from its source (npm package
 * chunks, a local file, or a file pulled earlier from a URL). The sha256 of the manifest is checked
 * once per process; a mismatch is an error, never a silent fallback.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { CutoutError } from '../errors.js';
import { PACKAGE_ROOT, type ModelManifest } from './manifest.js';

const require = createRequire(import.meta.url);

/**
 * Told when a model file has to be built rather than read from the cache (the first use after an
 * install whose postinstall did not run, or a cache that was cleared): a command shows it, so a
 * first run that spends half a minute assembling and converting says why.
 */
export interface PreparationEvent {
  state: 'start' | 'done';
  model: string;
  /** What is being built, e.g. "assembling and checking the weights", "fp32 copy", "512 px variant". */
  step: string;
}

/**
 * What the model files need to know of the one who asks for them (a pipeline, a command): where to
 * cache when the package's folder is read-only, and whom to tell of a build. Passed to every call
 * rather than set process-wide, so that two pipelines with other data directories or listeners
 * live side by side. A file that two of them ask for at once is built once (the `once` caches
 * below, keyed by the cache folder and the model); only the first asker hears its events.
 */
export interface ModelFilesContext {
  /** The data directory the caller resolved (--data > CUTOUT_HOME > config > ~/.cutout). */
  dataDir?: string;
  /** Told when a file is built (the CLI's progress display, the server's log, a library callback). */
  onPreparation?: (event: PreparationEvent) => void;
}

/** Runs `build` between a start and a done event. */
async function preparing<T>(ctx: ModelFilesContext, model: string, step: string, build: () => Promise<T>): Promise<T> {
  ctx.onPreparation?.({ state: 'start', model, step });
  try {
    return await build();
  } finally {
    ctx.onPreparation?.({ state: 'done', model, step });
  }
}

/**
 * Written into the cache by `cutout models pull` once every file of the default model is built
 * (weights, quality variants, int8 copies): a cache that holds it can be read-only.
 */
export const PREPARED_MARKER = 'PREPARED';

/**
 * Where assembled models are cached: models/cache in the package when writable (a clone, where
 * `npm install` fills it), else `models/` in the data directory (a read-only global install).
 */
export function modelCacheDir(dataDir?: string): string {
  const inPackage = path.join(PACKAGE_ROOT, 'models', 'cache');
  try {
    fs.mkdirSync(inPackage, { recursive: true });
    fs.accessSync(inPackage, fs.constants.W_OK);
    return inPackage;
  } catch {
    // A read-only cache that `cutout models pull` completed (the container image bakes it so):
    // read from where it is, so that nothing is rebuilt in the data directory at start.
    if (fs.existsSync(path.join(inPackage, PREPARED_MARKER))) return inPackage;
    const fallback = path.join(dataDir ?? (process.env.CUTOUT_HOME || path.join(os.homedir(), '.cutout')), 'models');
    fs.mkdirSync(fallback, { recursive: true });
    return fallback;
  }
}

export async function sha256File(file: string): Promise<string> {
  const hash = crypto.createHash('sha256');
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1 << 22 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Finds an installed npm package's root directory through its package.json (data-only packages
 * such as @imgly/background-removal-data have no main entry to resolve).
 */
function packageRoot(name: string): string {
  try {
    return path.dirname(require.resolve(`${name}/package.json`));
  } catch {
    throw new CutoutError('processing_failed', `Model package ${name} is not installed; run npm install`);
  }
}

/** The chunk files of an npm resource, in order. */
export function npmChunkFiles(source: { package: string; resources: string; resource: string }): string[] {
  const root = packageRoot(source.package);
  const resourcesFile = path.join(root, source.resources);
  const resources = JSON.parse(fs.readFileSync(resourcesFile, 'utf8')) as Record<string, { chunks: { hash: string }[] }>;
  const entry = resources[source.resource];
  if (!entry) throw new CutoutError('processing_failed', `Resource ${source.resource} not found in ${resourcesFile}`);
  return entry.chunks.map((c) => path.join(path.dirname(resourcesFile), c.hash));
}

/** The cache file name for a model: keyed by its content hash, so a changed manifest never reuses a stale file. */
export function cachedModelPath(manifest: ModelManifest, cacheDir = modelCacheDir()): string {
  return path.join(cacheDir, `${manifest.name}-${manifest.sha256.slice(0, 16)}.onnx`);
}

/** Writes atomically: a killed process never leaves a half-written model under the final name. */
async function writeAtomic(file: string, parts: string[]): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  const out = fs.createWriteStream(tmp);
  try {
    for (const part of parts) {
      await new Promise<void>((resolve, reject) => {
        const input = fs.createReadStream(part);
        input.on('error', reject);
        input.on('end', resolve);
        input.pipe(out, { end: false });
      });
    }
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    fs.renameSync(tmp, file);
  } catch (err) {
    out.destroy();
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

export interface ModelStatus {
  present: boolean;
  verified: boolean;
  path: string | null;
  detail: string;
}

/** Looks at a model's weights without assembling anything (for `cutout models list|verify`). */
export async function inspectWeights(manifest: ModelManifest, check: boolean, dataDir?: string): Promise<ModelStatus> {
  const candidates: string[] = [cachedModelPath(manifest, modelCacheDir(dataDir))];
  if (manifest.source.type === 'file') candidates.unshift(path.resolve(manifest.dir, manifest.source.path));
  const existing = candidates.find((f) => fs.existsSync(f)) ?? null;
  if (!existing && manifest.source.type === 'npm') {
    try {
      const chunks = npmChunkFiles(manifest.source);
      const missing = chunks.filter((c) => !fs.existsSync(c));
      if (missing.length) return { present: false, verified: false, path: null, detail: `${missing.length} chunk(s) missing` };
      if (!check) return { present: true, verified: false, path: null, detail: `${chunks.length} chunks in ${manifest.source.package}` };
      const hash = crypto.createHash('sha256');
      for (const c of chunks) hash.update(fs.readFileSync(c));
      const ok = hash.digest('hex') === manifest.sha256;
      return { present: true, verified: ok, path: null, detail: ok ? 'checksum ok' : 'checksum MISMATCH' };
    } catch (err) {
      return { present: false, verified: false, path: null, detail: (err as Error).message };
    }
  }
  if (!existing) return { present: false, verified: false, path: null, detail: manifest.source.type === 'url' ? `not pulled; run: cutout models pull ${manifest.name}` : 'file missing' };
  if (!check) return { present: true, verified: false, path: existing, detail: 'present' };
  const ok = (await sha256File(existing)) === manifest.sha256;
  return { present: true, verified: ok, path: existing, detail: ok ? 'checksum ok' : 'checksum MISMATCH' };
}

/**
 * One promise per key for the life of the process (each file is verified once); a failure is
 * forgotten so that the next call tries again.
 */
function once(cache: Map<string, Promise<string>>, key: string, make: () => Promise<string>): Promise<string> {
  let p = cache.get(key);
  if (!p) {
    p = make();
    p.catch(() => cache.delete(key));
    cache.set(key, p);
  }
  return p;
}

/**
 * A file derived from `source` by `transform`, cached at `target` with a sidecar sha256 that is
 * checked on first use in a process; rewritten when missing or damaged. Written through a
 * temporary name, so a killed process never leaves a half file under the final one.
 */
/**
 * Files already verified, by path, with the stat that was current then: a later process trusts
 * a file without reading its 176 MB again only while its size, mtime, inode and ctime are all
 * unchanged (any rewrite, copy or touch changes one of them). Kept in the cache folder as
 * `verified.json`; losing it costs one hash, never a wrong answer.
 */
interface VerifiedStat { size: number; mtimeMs: number; ctimeMs: number; ino: number; sha256: string }

function verifiedListFile(file: string): string {
  return path.join(path.dirname(file), 'verified.json');
}

function readVerifiedList(file: string): Record<string, VerifiedStat> {
  try {
    return JSON.parse(fs.readFileSync(verifiedListFile(file), 'utf8')) as Record<string, VerifiedStat>;
  } catch {
    return {};
  }
}

function statKey(file: string): Omit<VerifiedStat, 'sha256'> | null {
  try {
    const st = fs.statSync(file);
    return { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino };
  } catch {
    return null;
  }
}

/** The sha256 of `file`, read from the verified list when its stat is unchanged, else hashed (and remembered). */
export async function trustedSha256(file: string): Promise<string> {
  const key = statKey(file);
  const known = readVerifiedList(file)[path.basename(file)];
  if (key && known && known.size === key.size && known.mtimeMs === key.mtimeMs && known.ctimeMs === key.ctimeMs && known.ino === key.ino) {
    return known.sha256;
  }
  const sha256 = await sha256File(file);
  const after = statKey(file);
  if (after && key && after.mtimeMs === key.mtimeMs && after.size === key.size) {
    // Re-read the list just before writing: another process may have added its own file meanwhile.
    const list = readVerifiedList(file);
    list[path.basename(file)] = { ...after, sha256 };
    try {
      const tmp = `${verifiedListFile(file)}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, JSON.stringify(list, null, 1));
      fs.renameSync(tmp, verifiedListFile(file));
    } catch {
      // A read-only cache folder: the file is hashed again next time, nothing worse.
    }
  }
  return sha256;
}

/**
 * Weights files (shared-weights.ts) found intact in this process, by path: each is hashed once
 * per process, not once per graph that points into it.
 */
const weightsChecked = new Map<string, Promise<boolean>>();

/**
 * Whether a weights file matches its sidecar (hashed once per process). A damaged or missing one
 * is removed with its sidecar, so that the next build writes it again.
 */
function weightsIntact(file: string): Promise<boolean> {
  let p = weightsChecked.get(file);
  if (!p) {
    p = (async () => {
      const sidecar = `${file}.sha256`;
      const ok = fs.existsSync(file) && fs.existsSync(sidecar) && (await trustedSha256(file)) === fs.readFileSync(sidecar, 'utf8').trim();
      if (!ok) {
        try {
          fs.rmSync(file, { force: true });
          fs.rmSync(sidecar, { force: true });
        } catch {
          // A read-only cache: the build that follows fails with its own message.
        }
      }
      return ok;
    })();
    // Only a good answer is kept: a rebuilt file is checked again.
    p.then((ok) => { if (!ok) weightsChecked.delete(file); }, () => weightsChecked.delete(file));
    weightsChecked.set(file, p);
  }
  return p;
}

/**
 * The sidecar of a graph stored apart from its weights: the sha256 of the graph file itself, then
 * a line `<sha256> <file>` for the weights file it was written against. A weights file rewritten
 * with other bytes since (matching its own sidecar) does not pass for this graph's.
 */
const graphSidecar = (target: string) => `${target}.graph.sha256`;

/**
 * Whether a cached model file is the model its sidecar names. A self-contained file: its own
 * sha256 is the sidecar's. A graph stored apart from its weights (it has a graph sidecar): the
 * graph file and each weights file it points into match the sha256 written with the graph; the
 * model's sha256 in the sidecar was computed from exactly those bytes, so it holds without
 * building the 176 MB model in memory again.
 */
async function cachedModelIntact(target: string, expected: string): Promise<boolean> {
  const graphSha = graphSidecar(target);
  if (!fs.existsSync(graphSha)) return (await trustedSha256(target)) === expected;
  const [graph, ...lines] = fs.readFileSync(graphSha, 'utf8').trim().split('\n');
  if ((await trustedSha256(target)) !== graph) return false;
  const written = new Map(lines.map((line) => [line.slice(65), line.slice(0, 64)]));
  const { externalLocations } = await import('./shared-weights.js');
  for (const location of externalLocations(fs.readFileSync(target))) {
    const file = path.join(path.dirname(target), location);
    if (path.basename(location) !== location || !written.has(location)) return false;
    if (!(await weightsIntact(file)) || fs.readFileSync(`${file}.sha256`, 'utf8').trim() !== written.get(location)) return false;
  }
  return true;
}

/**
 * The self-contained bytes of a model file, its weights read back in when they are stored apart
 * (shared-weights.ts): what the rewrites, the int8 build and an export read.
 */
export async function readModelBytes(file: string): Promise<Buffer> {
  const { readModelBytes: read } = await import('./shared-weights.js');
  return read(file);
}

/** The sha256 of a model file's self-contained bytes (its sidecar's value for a cached file). */
export async function modelSha256(file: string): Promise<string> {
  if (!fs.existsSync(graphSidecar(file))) return trustedSha256(file);
  return crypto.createHash('sha256').update(await readModelBytes(file)).digest('hex');
}

/** Writes through a temporary name and a rename. */
function writeFileAtomic(file: string, bytes: Uint8Array | string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, bytes);
  fs.renameSync(tmp, file);
}

/**
 * Stores `bytes` (a self-contained model whose sha256 is `sha256`) at `target` as a graph whose
 * large initializers point into `weightsFile`, when that file holds, or can be written to hold,
 * exactly those initializers at the layout splitWeights gives. Returns false, having written
 * nothing at `target`, when it cannot (no large initializers, or a weights file laid out for other
 * weights): the caller stores the model whole.
 */
async function storeSharingWeights(target: string, bytes: Buffer, sha256: string, weightsFile: string): Promise<boolean> {
  const { splitWeights, inlineWeights } = await import('./shared-weights.js');
  const split = splitWeights(bytes, path.basename(weightsFile));
  if (!split) return false;
  // Read back as every reader will, before anything is written: the split must give the same model.
  const back = inlineWeights(split.graph, () => split.weights);
  if (crypto.createHash('sha256').update(back).digest('hex') !== sha256) return false;
  const weightsSha = crypto.createHash('sha256').update(split.weights).digest('hex');
  if (fs.existsSync(weightsFile) && (await weightsIntact(weightsFile))) {
    if (fs.readFileSync(`${weightsFile}.sha256`, 'utf8').trim() !== weightsSha) return false;
  } else {
    // Sidecar first: a weights file is never under its name without one that names it.
    writeFileAtomic(`${weightsFile}.sha256`, weightsSha + '\n');
    writeFileAtomic(weightsFile, split.weights);
    weightsChecked.set(weightsFile, Promise.resolve(true));
  }
  const graphSha = crypto.createHash('sha256').update(split.graph).digest('hex');
  // Sidecars before the graph: a process killed in between leaves sidecars that no longer
  // match the file under the target's name (or no file), which is rebuilt.
  fs.writeFileSync(graphSidecar(target), `${graphSha}\n${weightsSha} ${path.basename(weightsFile)}\n`);
  fs.writeFileSync(`${target}.sha256`, sha256 + '\n');
  writeFileAtomic(target, split.graph);
  return true;
}

async function derivedFile(
  target: string,
  label: { model: string; step: string; ctx: ModelFilesContext },
  source: () => Promise<string>,
  transform: (bytes: Buffer) => Promise<Buffer>,
  /** The weights file this model's large initializers go to, shared with the other fp32 graphs of the model. */
  weightsFile?: string,
): Promise<string> {
  const sidecar = `${target}.sha256`;
  if (fs.existsSync(target) && fs.existsSync(sidecar)) {
    if (await cachedModelIntact(target, fs.readFileSync(sidecar, 'utf8').trim())) return target;
    fs.rmSync(target, { force: true });
  }
  const input = await readModelBytes(await source());
  const bytes = await preparing(label.ctx, label.model, label.step, () => transform(input));
  const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
  if (weightsFile && (await storeSharingWeights(target, bytes, sha256, weightsFile))) return target;
  const tmp = `${target}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, bytes);
  fs.rmSync(graphSidecar(target), { force: true });
  fs.writeFileSync(sidecar, sha256 + '\n');
  fs.renameSync(tmp, target);
  return target;
}

/**
 * The one weights file of a model's fp32 graphs (the runnable copy and its input-side variants):
 * `<name>-<sha16>[.<revision>].weights`, beside them.
 */
export function sharedWeightsPath(manifest: ModelManifest, cacheDir = modelCacheDir()): string {
  return cachedModelPath(manifest, cacheDir).replace(/\.onnx$/, manifest.convert ? `.${RUNNABLE_REVISION}.weights` : '.weights');
}

const verified = new Map<string, Promise<string>>();
const runnable = new Map<string, Promise<string>>();
const variants = new Map<string, Promise<string>>();

/**
 * The file the inference session loads: the verified weights, or, when the manifest asks for a
 * conversion, a converted copy cached beside them (keyed by the source hash).
 */
export function ensureRunnableModel(manifest: ModelManifest, ctx: ModelFilesContext = {}): Promise<string> {
  if (!manifest.convert) return ensureModelFile(manifest, ctx);
  const cacheDir = modelCacheDir(ctx.dataDir);
  const target = cachedModelPath(manifest, cacheDir).replace(/\.onnx$/, `.${RUNNABLE_REVISION}.${manifest.convert}.onnx`);
  return once(runnable, `${cacheDir}:${manifest.name}:${manifest.sha256}:${manifest.convert}`, () =>
    derivedFile(target, { model: manifest.name, step: 'fp32 copy', ctx }, () => ensureModelFile(manifest, ctx), async (bytes) => {
      const { convertFp16ToFp32, keepOnlyOutput } = await import('./convert.js');
      return keepOnlyOutput(convertFp16ToFp32(bytes), manifest.output.name);
    }, sharedWeightsPath(manifest, cacheDir)),
  );
}

/**
 * The revision of the rewrites that make the runnable copy, in its name and in the names of the
 * files derived from it (side variants; the int8 copies are keyed by the calibration, itself
 * keyed by the runnable copy's sha256), so that a change rebuilds them instead of trusting old
 * files whose sidecars still match. `o1`: only the manifest's output is kept (convert.ts).
 */
export const RUNNABLE_REVISION = 'o1';

/** The cache file of a model's input-side variant: `<name>-<sha16>[.<revision>].side<S>.onnx`. */
export function variantModelPath(manifest: ModelManifest, side: number, cacheDir = modelCacheDir()): string {
  return cachedModelPath(manifest, cacheDir).replace(/\.onnx$/, `.${manifest.convert ? `${RUNNABLE_REVISION}.` : ''}side${side}.onnx`);
}

/**
 * The file to load for input side `side`: the runnable model itself at the manifest's input
 * size, else a variant rewritten for that side (variants.ts) from the runnable model, cached
 * beside it. Only the sides the manifest lists are allowed.
 */
export function ensureVariant(manifest: ModelManifest, side: number, ctx: ModelFilesContext = {}): Promise<string> {
  if (side === manifest.input.width && side === manifest.input.height) return ensureRunnableModel(manifest, ctx);
  if (!manifest.sides.includes(side)) {
    return Promise.reject(new CutoutError('invalid_request', `Model ${manifest.name} does not support input side ${side}; supported: ${manifest.sides.join(', ')}`));
  }
  const cacheDir = modelCacheDir(ctx.dataDir);
  const key = `${cacheDir}:${manifest.name}:${manifest.sha256}:${manifest.convert ?? ''}:${manifest.source.type === 'file' ? manifest.source.path : ''}:${side}`;
  return once(variants, key, () =>
    derivedFile(variantModelPath(manifest, side, cacheDir), { model: manifest.name, step: `${side} px variant`, ctx }, () => ensureRunnableModel(manifest, ctx), async (bytes) => {
      const { rewriteInputSide } = await import('./variants.js');
      return rewriteInputSide(bytes, side, manifest.input.width);
    }, sharedWeightsPath(manifest, cacheDir)),
  );
}

/**
 * The path of a verified .onnx file for the manifest; assembles npm chunks into the cache on first
 * use. Verified once per process.
 */
export function ensureModelFile(manifest: ModelManifest, ctx: ModelFilesContext = {}): Promise<string> {
  const key = `${modelCacheDir(ctx.dataDir)}:${manifest.name}:${manifest.sha256}:${manifest.source.type === 'file' ? manifest.source.path : ''}`;
  return once(verified, key, () => assembleAndVerify(manifest, ctx));
}

async function assembleAndVerify(manifest: ModelManifest, ctx: ModelFilesContext): Promise<string> {
  let file: string;
  if (manifest.source.type === 'file') {
    file = path.resolve(manifest.dir, manifest.source.path);
    if (!fs.existsSync(file)) throw new CutoutError('processing_failed', `Model file ${file} is missing`);
  } else {
    file = cachedModelPath(manifest, modelCacheDir(ctx.dataDir));
    if (!fs.existsSync(file)) {
      if (manifest.source.type === 'url') {
        throw new CutoutError('processing_failed', `Model ${manifest.name} has not been downloaded; run: cutout models pull ${manifest.name}`);
      }
      const source = manifest.source;
      const target = file;
      await preparing(ctx, manifest.name, `weights from ${source.package}`, () => writeAtomic(target, npmChunkFiles(source)));
    }
  }
  const actual = await trustedSha256(file);
  if (actual !== manifest.sha256) {
    if (manifest.source.type !== 'file') fs.rmSync(file, { force: true });
    throw new CutoutError('processing_failed', `Checksum mismatch for model ${manifest.name}: expected ${manifest.sha256}, got ${actual}`);
  }
  return file;
}

/** Downloads a URL-sourced model into the cache (only on the user's explicit request). */
export async function pullModel(manifest: ModelManifest, ctx: ModelFilesContext = {}): Promise<string> {
  if (manifest.source.type !== 'url') return ensureRunnableModel(manifest, ctx);
  const res = await fetch(manifest.source.url);
  if (!res.ok || !res.body) throw new CutoutError('processing_failed', `Download of ${manifest.name} failed: HTTP ${res.status}`);
  const file = cachedModelPath(manifest, modelCacheDir(ctx.dataDir));
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, Buffer.from(await res.arrayBuffer()));
  fs.renameSync(tmp, file);
  return ensureRunnableModel(manifest, ctx);
}

const int8Models = new Map<string, Promise<string>>();

/** The cache file of a model's int8 copy at input side `side`: `<name>-<sha16>[.side<S>].int8-<build key>.onnx`. */
export function int8ModelPath(manifest: ModelManifest, side: number, buildKey: string, cacheDir = modelCacheDir()): string {
  const native = side === manifest.input.width && side === manifest.input.height;
  const base = native ? cachedModelPath(manifest, cacheDir) : variantModelPath(manifest, side, cacheDir);
  return base.replace(/\.onnx$/, `.int8-${buildKey}.onnx`);
}

/**
 * The int8 (QDQ) copy of the model at input side `side`, built from that side's fp32 file with the
 * shipped calibration ranges (int8.ts) and cached beside it with its sha256 sidecar, like the
 * variants. The ranges must have been measured on this fp32 model (its sha256 is checked).
 */
export function ensureInt8Model(manifest: ModelManifest, side: number, ctx: ModelFilesContext = {}): Promise<string> {
  const cacheDir = modelCacheDir(ctx.dataDir);
  const key = `${cacheDir}:${manifest.name}:${manifest.sha256}:${manifest.convert ?? ''}:${manifest.source.type === 'file' ? manifest.source.path : ''}:${side}`;
  return once(int8Models, key, async () => {
    const { int8BuildKey } = await import('./int8.js');
    const step = side === manifest.input.width ? 'int8 copy' : `${side} px int8 copy`;
    return derivedFile(int8ModelPath(manifest, side, int8BuildKey(manifest, side), cacheDir), { model: manifest.name, step, ctx }, () => ensureVariant(manifest, side, ctx), async (bytes) => {
      // Only when the int8 copy is built: a cached one is loaded without reading the fp32 model.
      const fp32Sha256 = await modelSha256(await ensureRunnableModel(manifest, ctx));
      const { buildInt8 } = await import('./int8.js');
      return buildInt8(manifest, fp32Sha256, bytes, side);
    });
  });
}

/** The file to load for a side at a precision. */
export function ensureModelAt(manifest: ModelManifest, side: number, precision: 'fp32' | 'int8', ctx: ModelFilesContext = {}): Promise<string> {
  return precision === 'int8' ? ensureInt8Model(manifest, side, ctx) : ensureVariant(manifest, side, ctx);
}
