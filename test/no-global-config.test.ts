/**
 * No module-level mutable configuration in src/pipeline, src/toolchain and src/oip (issue 25): configuration
 * (model, precision, data directory, model call, listeners) lives in each pipeline object. This
 * reads the sources: every top-level `let`, every module-level collection and every exported
 * setter-shaped function must be on the list below, each with why it is not configuration.
 * A new one fails here until it is either moved into an object or listed with its reason.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/cli.js';

/** `file: declaration` -> why it may stay module-level. */
const ALLOWED: Record<string, string> = {
  'toolchain/convert.ts: let halfTable': 'a lookup table computed once (fp16 to fp32), the same for every caller',
  'toolchain/int8.ts: let flagsRead': "the CPU's feature flags, read once: a fact of the machine",
  'toolchain/int8.ts: const int8SidesByModel': 'which int8 sides ship, by model name and weights: facts of the package, keyed by model',
  'pipeline/memory.ts: let gc': 'whether the process was started with --expose-gc: a fact of the process',
  'pipeline/inference-thread.ts: const threads': 'the pool of worker threads, shared by leases; holds no configuration (inference-thread.ts says why)',
  'pipeline/inference-worker.ts: const sessions': "the worker thread's own sessions, by model file: the thread's state, not the main thread's",
  'pipeline/inference-worker.ts: let chain': "the worker thread's queue of requests",
  'toolchain/weights.ts: const verified': 'checked model files, keyed by cache folder and model: a memo of facts on disk',
  'toolchain/weights.ts: const weightsChecked': 'shared weights files found intact, by path: a memo of facts on disk, hashed once per process',
  'toolchain/weights.ts: const runnable': 'the same memo for the fp32 copies',
  'toolchain/weights.ts: const variants': 'the same memo for the side variants',
  'toolchain/weights.ts: const int8Models': 'the same memo for the int8 copies',
  'toolchain/onnx-graph.ts: const FLOAT_PRODUCERS': 'a constant set of ONNX op types, never written',
  'oip/client.ts: const OUTAGE_STATUSES': 'a constant set of HTTP statuses, never written',
};

function sources(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, 'src', dir)).filter((f) => f.endsWith('.ts')).map((f) => `${dir}/${f}`);
}

t.test('src/pipeline, src/toolchain and src/oip hold no module-level configuration', async (t) => {
  const found: string[] = [];
  for (const file of [...sources('pipeline'), ...sources('toolchain'), ...sources('oip')]) {
    const text = fs.readFileSync(path.join(ROOT, 'src', file), 'utf8');
    for (const m of text.matchAll(/^(?:export )?let (\w+)/gm)) found.push(`${file}: let ${m[1]}`);
    // A collection typed read-only (ReadonlySet, ReadonlyMap) is a constant; any other may be written.
    for (const m of text.matchAll(/^(?:export )?const (\w+)(: [^=]+)? = new (?:Map|Set|WeakMap|Array)\b/gm)) {
      if (!/^: Readonly/.test(m[2] ?? '')) found.push(`${file}: const ${m[1]}`);
    }
    for (const m of text.matchAll(/^export (?:async )?function ((?:set|use|on)[A-Z]\w*)/gm)) found.push(`${file}: setter ${m[1]}`);
  }
  const unexplained = found.filter((f) => !(f in ALLOWED));
  t.same(unexplained, [], 'every module-level state is listed with its reason');
  const gone = Object.keys(ALLOWED).filter((a) => !found.includes(a));
  t.same(gone, [], 'the list holds nothing that is gone (it stays exact)');
  // The setters of the old process-wide pipeline are gone for good.
  for (const name of ['setDefaultModel', 'setDefaultPrecision', 'setModelDataDir', 'onModelPreparation', 'useRemoteInference', 'setQualityParams', 'setEdgeParams']) {
    const users = [...sources('pipeline'), ...sources('toolchain'), ...sources('oip')].filter((f) => fs.readFileSync(path.join(ROOT, 'src', f), 'utf8').includes(name));
    t.same(users, [], `${name} is gone`);
  }
});
