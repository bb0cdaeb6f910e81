/**
 * Input-side variants of the model (issue 7): the graph rewrite, its cache, the quality setting
 * through the pipeline, the CLI (child process) and the API.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { resolveModel } from '../../src/toolchain/manifest.js';
import { ensureRunnableModel, ensureVariant, variantModelPath } from '../../src/toolchain/weights.js';
import { cropToContent, inputPlan, modelSide, rewriteInputSide, scaleDim } from '../../src/toolchain/variants.js';
import { createPipeline } from '../../src/pipeline/index.js';
import { QUALITIES, parseImageOptions, API_DEFAULTS } from '../../src/options.js';
import { alphaAt, FIXTURES, runCli } from '../helpers/cli.js';
import { bearer, createKey, startServe } from '../helpers/api-server.js';

const manifest = resolveModel('isnet-medium');
const pipeline = createPipeline();
t.teardown(() => pipeline.close());

t.test('sizes scale as the ceil-mode pools give them', async (t) => {
  t.equal(scaleDim(1024, 512, 1024), 512);
  t.equal(scaleDim(32, 512, 1024), 16);
  t.equal(scaleDim(32, 320, 1024), 10);
  t.equal(scaleDim(64, 448, 1024), 28);
  t.throws(() => rewriteInputSide(new Uint8Array(0), 500), /multiple of 64/);
});

t.test('the quality setting picks a side the manifest lists', async (t) => {
  t.same(QUALITIES, ['fast', 'balanced', 'best', 'max']);
  t.equal(modelSide(manifest, 'max'), 1024, 'max: best plus a second pass, at the same side');
  t.equal(modelSide(manifest, undefined), 1024, 'absent: the model as shipped');
  t.equal(modelSide(manifest, 'best'), 1024);
  for (const q of ['fast', 'balanced'] as const) {
    const side = modelSide(manifest, q);
    t.ok(side < 1024 && side % 64 === 0 && manifest.sides.includes(side), `${q} -> ${side}`);
  }
  t.ok(modelSide(manifest, 'fast') <= modelSide(manifest, 'balanced'));
  t.equal(modelSide({ ...manifest, sides: [1024] }, 'fast'), 1024, 'a model without smaller sides runs as shipped');
  t.equal(parseImageOptions({ quality: 'FAST' }, 'api', API_DEFAULTS).quality, 'fast');
  t.equal(parseImageOptions({}, 'api', API_DEFAULTS).quality, undefined, 'absent stays absent (v1)');
  t.throws(() => parseImageOptions({ quality: 'turbo' }, 'api', API_DEFAULTS), /Expected one of fast, balanced, best, max for quality but received "turbo"/);
});

t.test('a letterbox plan keeps the aspect and crops the output back', async (t) => {
  const plan = { width: 8, height: 8, content: { left: 0, top: 2, width: 8, height: 4 }, pad: 'grey' as const };
  const out = Float32Array.from({ length: 64 }, (_, i) => i);
  const rgb = new Uint8Array(64 * 3).map((_, i) => i % 251);
  const g = cropToContent(out, rgb, plan);
  t.same([g.width, g.height], [8, 4]);
  t.same(Array.from(g.data.subarray(0, 3)), [16, 17, 18]);
  t.same(Array.from(g.rgb.subarray(0, 3)), [48, 49, 50]);
  const fast = inputPlan(manifest, 'fast', 1200, 800);
  const side = modelSide(manifest, 'fast');
  t.same([fast.width, fast.height], [side, side]);
  t.equal(fast.content.width, side, 'the long side fills the grid');
  t.ok(Math.abs(fast.content.height - (side * 2) / 3) <= 1, 'the short side keeps the aspect');
  t.equal(fast.content.top, (side - fast.content.height) >> 1, 'centred');
  const best = inputPlan(manifest, 'best', 1200, 800);
  t.same([best.width, best.height, best.content.width, best.content.height], [1024, 1024, 1024, 1024]);
});

t.test('the runnable copy and its variants declare only the output the pipeline reads', async (t) => {
  // onnxruntime runs every node whatever is fetched: ISNet's eleven other outputs were computed for nothing.
  const { createRequire } = await import('node:module');
  const { onnx } = createRequire(import.meta.url)('onnx-proto') as typeof import('onnx-proto');
  for (const file of [await ensureRunnableModel(manifest), await ensureVariant(manifest, 512)]) {
    const graph = onnx.ModelProto.decode(fs.readFileSync(file)).graph!;
    t.same(graph.output!.map((o) => o.name), [manifest.output.name], path.basename(file));
    t.notOk(graph.node!.some((n) => n.output!.includes('1890')), 'the second side map is no longer computed');
  }
});

t.test('variants at 512 and 768 load and answer at the side asked for', async (t) => {
  t.equal(await ensureVariant(manifest, 1024), await ensureRunnableModel(manifest), 'the manifest side is the runnable model itself');
  await t.rejects(ensureVariant(manifest, 320), /does not support input side 320/);
  for (const side of [512, 768]) {
    const file = await ensureVariant(manifest, side);
    t.equal(file, variantModelPath(manifest, side));
    // The name carries the revision of the runnable copy's rewrites, so a new revision rebuilds the variants.
    t.match(path.basename(file), new RegExp(`^isnet-medium-[0-9a-f]{16}\\.o\\d+\\.side${side}\\.onnx$`));
    t.equal(fs.readFileSync(`${file}.sha256`, 'utf8').trim().length, 64, 'a sidecar checksum');
    const tensor = new Float32Array(3 * side * side).fill(0.1);
    const out = await pipeline.runModel(tensor, side, side);
    t.same([out.width, out.height, out.data.length], [side, side, side * side], `output [1, 1, ${side}, ${side}]`);
  }
});

t.test('the pipeline at quality fast: same output size, a subject found', async (t) => {
  const photo = fs.readFileSync(path.join(FIXTURES, 'coffee.jpg'));
  const base = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false };
  for (const quality of ['fast', 'balanced'] as const) {
    const r = await pipeline.removeBackground(photo, { ...base, quality });
    t.same([r.width, r.height], [600, 400], quality);
    const [a, b, c, d, centre] = await alphaAt(r.data, [[2, 2], [597, 2], [2, 397], [597, 397], [300, 200]]);
    t.ok(Math.max(a, b, c, d) < 16 && centre > 240, `${quality}: corners transparent, subject opaque (${a}, ${b}, ${c}, ${d}; ${centre})`);
  }
});

function workdir(t: Tap.Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-variants-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test('CLI --quality fast through a child process; the cached variant is reused', async (t) => {
  const dir = workdir(t);
  const env = { CUTOUT_HOME: path.join(dir, 'home') };
  const variant = variantModelPath(manifest, modelSide(manifest, 'fast'));
  const first = await runCli([path.join(FIXTURES, 'coffee.jpg'), '--quality', 'fast', '--out', path.join(dir, 'a.png'), '--data', path.join(dir, 'data')], { env });
  t.equal(first.code, 0, first.stderr);
  const mtime = fs.statSync(variant).mtimeMs;
  const second = await runCli([path.join(FIXTURES, 'astronaut.jpg'), '--quality', 'fast', '--out', path.join(dir, 'b.png'), '--data', path.join(dir, 'data')], { env });
  t.equal(second.code, 0, second.stderr);
  t.equal(fs.statSync(variant).mtimeMs, mtime, 'the second run does not rewrite the variant');
  const meta = await sharp(path.join(dir, 'a.png')).metadata();
  t.same([meta.format, meta.width, meta.height, meta.channels], ['png', 600, 400, 4]);
  const [a, b, c, d, centre] = await alphaAt(path.join(dir, 'a.png'), [[2, 2], [597, 2], [2, 397], [597, 397], [300, 200]]);
  t.ok(Math.max(a, b, c, d) < 16, `corners transparent (${a}, ${b}, ${c}, ${d})`);
  t.ok(centre > 240, `subject opaque (${centre})`);
  const [sky, chest] = await alphaAt(path.join(dir, 'b.png'), [[508, 3], [180, 400]]);
  t.ok(sky < 16 && chest > 240, `second image: background ${sky}, subject ${chest}`);

  const bad = await runCli([path.join(FIXTURES, 'coffee.jpg'), '--quality', 'turbo', '--out', path.join(dir, 'c.png'), '--data', path.join(dir, 'data')], { env });
  t.equal(bad.code, 2, 'a bad value is a usage error');
  t.match(bad.stderr, /Expected one of fast, balanced, best, max for --quality but received "turbo"/);
  t.notOk(fs.existsSync(path.join(dir, 'c.png')));
});

// The server's parameter list (src/server/http.ts, OPTION_PARAMS) must name `quality` before this passes.
t.test('API: quality=fast is accepted and answers with a cutout; a bad value is a 400', async (t) => {
  const srv = await startServe(t, ['--workers', '1']);
  const { key } = await createKey(srv.dataDir);
  const coffee = fs.readFileSync(path.join(FIXTURES, 'coffee.jpg'));
  const form = (fields: Record<string, string>) => {
    const f = new FormData();
    f.append('image_file', new Blob([coffee]), 'photo.jpg');
    for (const [k, v] of Object.entries(fields)) f.append(k, v);
    return f;
  };
  const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: form({ size: 'full', quality: 'fast' }) });
  const body = Buffer.from(await res.arrayBuffer());
  t.equal(res.status, 200, res.status === 200 ? '' : body.toString());
  if (res.status === 200) {
    const meta = await sharp(body).metadata();
    t.same([meta.format, meta.width, meta.height, meta.hasAlpha], ['png', 600, 400, true]);
    const [corner, centre] = await alphaAt(body, [[0, 0], [300, 200]]);
    t.ok(corner < centre, `transparent background (corner ${corner}, centre ${centre})`);
  }
  const bad = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: form({ quality: 'turbo' }) });
  t.equal(bad.status, 400);
  t.match(((await bad.json()) as any).error.message, /quality/);
});
