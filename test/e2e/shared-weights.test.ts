/**
 * The fp32 graphs of a model share one weights file (toolchain/shared-weights.ts, issue 43): the
 * split and its inverse, the cache's layout, and a damaged weights file found and rebuilt.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { resolveModel } from '../../src/toolchain/manifest.js';
import { EXTERNAL_ALIGN, EXTERNAL_MIN_BYTES, externalLocations, inlineWeights, splitWeights } from '../../src/toolchain/shared-weights.js';
import { ensureRunnableModel, ensureVariant, modelSha256, readModelBytes, sharedWeightsPath } from '../../src/toolchain/weights.js';
import { calibrationFile } from '../../src/toolchain/int8.js';
import { FIXTURES, runCli } from '../helpers/cli.js';

const { onnx } = createRequire(import.meta.url)('onnx-proto') as typeof import('onnx-proto');
const manifest = resolveModel('isnet-medium');
const sha256 = (bytes: Uint8Array) => crypto.createHash('sha256').update(bytes).digest('hex');

/** A model with two large initializers and a small one whose value differs by `small`. */
function tinyModel(small: number): Buffer {
  const big = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * seed) & 255);
  return Buffer.from(onnx.ModelProto.encode({
    irVersion: 8,
    graph: {
      name: 'g',
      initializer: [
        { name: 'w1', dataType: 1, dims: [1500], rawData: big(6000, 7) },
        { name: 'sizes', dataType: 7, dims: [2], rawData: new Uint8Array(new BigInt64Array([BigInt(small), BigInt(small)]).buffer) },
        { name: 'w2', dataType: 1, dims: [300], rawData: big(1200, 13) },
      ],
    },
  }).finish());
}

t.test('split and inline: the same model back byte for byte, the same weights for graphs that differ in small constants', async (t) => {
  const a = tinyModel(32);
  const b = tinyModel(16);
  const sa = splitWeights(a, 'm.weights')!;
  const sb = splitWeights(b, 'm.weights')!;
  t.ok(sa && sb, 'both have initializers to move');
  t.ok(sa.graph.length < 200, `the graph keeps only the small ones (${sa.graph.length} bytes)`);
  t.same(externalLocations(sa.graph), ['m.weights']);
  t.same(externalLocations(a), [], 'a self-contained model points nowhere');
  t.equal(sha256(sa.weights), sha256(sb.weights), 'the same large initializers give the same weights bytes');
  t.not(sha256(sa.graph), sha256(sb.graph), 'while the graphs differ');
  t.equal(sa.weights.length, 2 * EXTERNAL_ALIGN + 1200, 'the second tensor (after 6000 bytes) starts at the next aligned offset, 8192');
  t.equal(sha256(inlineWeights(sa.graph, () => sa.weights)), sha256(a), 'inlined again: the original bytes');
  t.equal(sha256(inlineWeights(sb.graph, () => sa.weights)), sha256(b), 'and for the other graph, from the first one\'s weights');
  t.equal(inlineWeights(a, () => { throw new Error('not read'); }), a, 'a self-contained model is returned as it is');
  t.throws(() => inlineWeights(sa.graph, () => sa.weights.subarray(0, 100)), /past the end/, 'a short weights file is refused');
  t.equal(splitWeights(onnx.ModelProto.encode({ graph: { name: 'g', initializer: [{ name: 's', dataType: 1, rawData: new Uint8Array(EXTERNAL_MIN_BYTES - 1) }] } }).finish(), 'x'), null, 'nothing to move: null');
});

t.test('the cache: the three fp32 graphs point into one weights file, each the same model as before the split', async (t) => {
  const weights = sharedWeightsPath(manifest);
  // A cache written before the split (three whole fp32 files) still loads as it is; here its fp32
  // files are set aside so that they are built again in today's layout (a fresh clone has it).
  const ensureAll = () => Promise.all([ensureRunnableModel(manifest), ensureVariant(manifest, 512), ensureVariant(manifest, 768)]);
  let old = false;
  for (const file of await ensureAll()) {
    if (fs.statSync(file).size < 1 << 20) continue;
    old = true;
    for (const f of [file, `${file}.sha256`, `${file}.graph.sha256`]) fs.rmSync(f, { force: true });
  }
  // Built again by a process of its own (this one keeps what it has resolved), as `npm install` does.
  if (old) t.equal((await runCli(['models', 'pull'])).code, 0, 'the old layout set aside and the files built again');
  const files = await ensureAll();
  for (const file of files) {
    t.ok(fs.statSync(file).size < 1 << 20, `${path.basename(file)}: the graph alone (${fs.statSync(file).size} bytes)`);
    t.same(externalLocations(fs.readFileSync(file)), [path.basename(weights)], 'its initializers point into the shared weights file');
    t.equal(await modelSha256(file), fs.readFileSync(`${file}.sha256`, 'utf8').trim(), 'its self-contained bytes are what the sidecar names');
  }
  t.ok(fs.statSync(weights).size > 170e6, `one weights file of ${(fs.statSync(weights).size / 1e6).toFixed(0)} MB`);
  const calibration = JSON.parse(fs.readFileSync(calibrationFile(manifest), 'utf8')) as { fp32Sha256: string };
  t.equal(await modelSha256(files[0]), calibration.fp32Sha256, 'the fp32 model is the one the int8 ranges were measured on');
  const bytes = await readModelBytes(files[1]);
  t.ok(onnx.ModelProto.decode(bytes).graph!.initializer!.every((i) => i.dataLocation !== 1), 'readModelBytes gives the model with its weights in it');
});

t.test('a damaged weights file is found by its sidecar and rebuilt by the next run', async (t) => {
  const weights = sharedWeightsPath(manifest);
  const fd = fs.openSync(weights, 'r+');
  try {
    fs.writeSync(fd, Buffer.from('damaged'), 0, 7, 1 << 20);
  } finally {
    fs.closeSync(fd);
  }
  const out = path.join(t.testdir(), 'fast.png');
  const r = await runCli([path.join(FIXTURES, 'chelsea.jpg'), '--quality', 'fast', '--precision', 'fp32', '--out', out]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stderr, /preparing model isnet-medium/, 'the run said it was building the model files again');
  t.ok(fs.existsSync(out), 'the cutout was written');
  t.equal(sha256(fs.readFileSync(weights)), fs.readFileSync(`${weights}.sha256`, 'utf8').trim(), 'the weights file was written again and matches its sidecar');
  const variant = await ensureVariant(manifest, 512);
  t.equal(await modelSha256(variant), fs.readFileSync(`${variant}.sha256`, 'utf8').trim(), 'the 512 variant is its model again');
});
