/**
 * `cutout models export --triton DIR [NAME]`: a Triton model repository for a model, so that a
 * GPU machine runs it with `tritonserver --model-repository DIR` and `cutout serve --upstream`
 * sends it the tensors. Layout: DIR/NAME/config.pbtxt and DIR/NAME/1/model.onnx.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ModelManifest } from '../pipeline/manifest.js';
import { expectedTensors, type TensorMetadata } from './protocol.js';

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

/**
 * Writes the repository entry. `weights`: the verified fp32 file from the cache, hard-linked when
 * it is on the same file system (no second 176 MB copy), copied otherwise.
 */
export async function exportTriton(dir: string, manifest: ModelManifest, weights: string, name = manifest.name): Promise<{ config: string; model: string }> {
  const modelDir = path.join(dir, name);
  const versionDir = path.join(modelDir, '1');
  await fs.mkdir(versionDir, { recursive: true });
  const config = path.join(modelDir, 'config.pbtxt');
  await fs.writeFile(config, tritonConfig(manifest, name));
  const model = path.join(versionDir, 'model.onnx');
  await fs.rm(model, { force: true });
  try {
    await fs.link(weights, model);
  } catch {
    await fs.copyFile(weights, model);
  }
  return { config, model };
}
