/**
 * `cutout models export --triton DIR [NAME]`: a Triton model repository for a model, so that a
 * GPU machine runs it with `tritonserver --model-repository DIR` and `cutout serve --upstream`
 * sends it the tensors. Layout: DIR/NAME/config.pbtxt and DIR/NAME/1/model.onnx.
 */
import crypto from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { CutoutError } from '../errors.js';
import type { ModelManifest } from '../toolchain/manifest.js';
import { expectedTensors, type TensorMetadata } from './protocol.js';

/** A model file larger than this holds its weights: not read to look for external data. */
const EXTERNAL_GRAPH_MAX_BYTES = 16 << 20;

/** Triton's config.pbtxt: the ONNX Runtime backend, no batching (the batch dimension is in the dims). */
export function tritonConfig(manifest: ModelManifest, name = manifest.name): string {
  const { input, output } = expectedTensors(manifest, manifest.input.width);
  const tensor = (t: TensorMetadata) => `  {\n    name: "${t.name}"\n    data_type: TYPE_${t.datatype}\n    dims: [ ${t.shape.join(', ')} ]\n  }`;
  return [
    `name: "${name}"`,
    'platform: "onnxruntime_onnx"',
    'max_batch_size: 0',
    `input [\n${tensor(input)}\n]`,
    // ISNet has eleven more outputs; Triton needs only those clients ask for listed.
    `output [\n${tensor(output)}\n]`,
    '',
  ].join('\n');
}

/** Refuses a symbolic link where the export writes: it would write wherever the link points. */
async function refuseSymlink(p: string): Promise<void> {
  let st;
  try {
    st = await fs.lstat(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (st.isSymbolicLink()) {
    throw new CutoutError('invalid_request', `${p} is a symbolic link; models export does not write through one: remove it, or export to another directory`);
  }
}

/**
 * Writes `file` whole or not at all: a temporary file beside it, created exclusively (O_EXCL,
 * which never follows a link), filled by `fill`, then renamed over the target (a rename replaces
 * the directory entry, never what a link there points to).
 */
async function writeReplacing(file: string, fill: (tmp: string) => Promise<void>): Promise<void> {
  await refuseSymlink(file);
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.tmp`);
  try {
    await fill(tmp);
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}

/**
 * Writes the repository entry. `weights`: the verified fp32 file from the cache, hard-linked when
 * it is on the same file system (no second 176 MB copy), copied otherwise. Each file goes through
 * a temporary file and a rename; a symbolic link at the entry's directories or files is refused.
 */
export async function exportTriton(dir: string, manifest: ModelManifest, weights: string, name = manifest.name): Promise<{ config: string; model: string }> {
  const modelDir = path.join(dir, name);
  const versionDir = path.join(modelDir, '1');
  await fs.mkdir(dir, { recursive: true });
  for (const d of [modelDir, versionDir]) {
    await refuseSymlink(d);
    await fs.mkdir(d, { recursive: true });
  }
  const config = path.join(modelDir, 'config.pbtxt');
  await writeReplacing(config, async (tmp) => {
    const fh = await fs.open(tmp, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o644);
    try {
      await fh.writeFile(tritonConfig(manifest, name));
      await fh.sync();
    } finally {
      await fh.close();
    }
  });
  const model = path.join(versionDir, 'model.onnx');
  // A cached graph whose weights are kept apart (toolchain/shared-weights.ts) is written whole:
  // Triton's entry is one self-contained model.onnx, the same bytes as the cache's sidecar names.
  const { externalLocations, readModelBytes } = await import('../toolchain/shared-weights.js');
  const apart = (await fs.stat(weights)).size < EXTERNAL_GRAPH_MAX_BYTES && externalLocations(await fs.readFile(weights)).length > 0;
  await writeReplacing(model, async (tmp) => {
    if (apart) {
      await fs.writeFile(tmp, readModelBytes(weights), { flag: 'wx' });
      return;
    }
    try {
      await fs.link(weights, tmp);
    } catch {
      await fs.copyFile(weights, tmp, fsConstants.COPYFILE_EXCL);
    }
  });
  return { config, model };
}
