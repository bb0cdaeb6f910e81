/**
 * Models are data: one JSON manifest per model in `models/`. This module reads and validates
 * manifests and resolves what `--model` names (a manifest name, or an .onnx file whose manifest
 * sits beside it as `<file>.json` or `<stem>.json`).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CutoutError } from '../errors.js';

export type ModelSource =
  /** Chunks listed in a resources.json of an npm package, concatenated in order. */
  | { type: 'npm'; package: string; resources: string; resource: string }
  /** A local .onnx file, relative to the manifest. */
  | { type: 'file'; path: string }
  /** A URL, fetched only by `cutout models pull`, never at run time. */
  | { type: 'url'; url: string };

export interface ModelManifest {
  name: string;
  description: string;
  default?: boolean;
  license: string;
  licenseNote?: string;
  source: ModelSource;
  bytes?: number;
  /** sha256 of the assembled .onnx file. */
  sha256: string;
  precision?: string;
  input: { name: string; width: number; height: number; layout: 'NCHW'; channels: 'RGB'; mean: [number, number, number]; std: [number, number, number] };
  output: { name: string; range: [number, number] };
  /** A rewrite applied once after verification and cached: fp16 weights made fp32 for the CPU backend. */
  convert?: 'fp16-to-fp32';
  /** Input sides the model supports. */
  sides: number[];
  /** Directory of the manifest file (set when loaded). */
  dir: string;
}

/** The package root: dist/toolchain/manifest.js -> ../../ */
export const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const MODELS_DIR = path.join(PACKAGE_ROOT, 'models');

function bad(file: string, what: string): never {
  throw new CutoutError('invalid_request', `Invalid model manifest ${file}: ${what}`);
}

/** Reads and validates one manifest file. */
export function readManifest(file: string): ModelManifest {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new CutoutError('invalid_request', `Cannot read model manifest ${file}: ${(err as Error).message}`);
  }
  const m = raw as Partial<ModelManifest>;
  if (!m || typeof m !== 'object') bad(file, 'not an object');
  if (typeof m.name !== 'string' || !/^[a-z0-9][a-z0-9._-]*$/i.test(m.name)) bad(file, 'name must be a simple identifier');
  if (typeof m.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(m.sha256)) bad(file, 'sha256 must be 64 hex digits');
  if (typeof m.license !== 'string') bad(file, 'license is required');
  const src = m.source as ModelSource | undefined;
  if (!src || !['npm', 'file', 'url'].includes(src.type)) bad(file, 'source.type must be npm, file or url');
  const inp = m.input;
  if (!inp || typeof inp.name !== 'string' || !Number.isInteger(inp.width) || !Number.isInteger(inp.height)) bad(file, 'input needs name, width, height');
  if (!Array.isArray(inp.mean) || inp.mean.length !== 3 || !Array.isArray(inp.std) || inp.std.length !== 3) bad(file, 'input.mean and input.std need 3 numbers');
  if (!m.output || typeof m.output.name !== 'string') bad(file, 'output.name is required');
  return { description: '', sides: [inp.width], ...m, dir: path.dirname(path.resolve(file)) } as ModelManifest;
}

/** Every manifest in the package's models/ directory, default first. */
export function listManifests(dir = MODELS_DIR): ModelManifest[] {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.json')) : [];
  return files
    .map((f) => readManifest(path.join(dir, f)))
    .sort((a, b) => Number(Boolean(b.default)) - Number(Boolean(a.default)) || a.name.localeCompare(b.name));
}

/**
 * Resolves `--model`: a manifest name from models/, or a path to an .onnx file with a manifest
 * beside it (`model.onnx.json` or `model.json`), whose source becomes that file.
 */
export function resolveModel(nameOrPath: string): ModelManifest {
  if (nameOrPath.endsWith('.onnx') || nameOrPath.includes('/') || nameOrPath.includes(path.sep)) {
    const onnx = path.resolve(nameOrPath);
    if (!fs.existsSync(onnx)) throw new CutoutError('invalid_request', `Model file not found: ${nameOrPath}`);
    const candidates = [`${onnx}.json`, onnx.replace(/\.onnx$/, '') + '.json'];
    const manifestFile = candidates.find((c) => fs.existsSync(c));
    if (!manifestFile) {
      throw new CutoutError('invalid_request', `No manifest for ${nameOrPath}: expected ${path.basename(candidates[0])} or ${path.basename(candidates[1])} beside it`);
    }
    const m = readManifest(manifestFile);
    return { ...m, source: { type: 'file', path: onnx } };
  }
  const found = listManifests().find((m) => m.name === nameOrPath);
  if (!found) {
    const known = listManifests().map((m) => m.name).join(', ');
    throw new CutoutError('invalid_request', `Unknown model "${nameOrPath}"; known models: ${known}`);
  }
  return found;
}
