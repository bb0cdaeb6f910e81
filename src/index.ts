/**
 * The package's entry: `import { removeBackground, createRemover, CutoutError } from 'cutout'`.
 * Importing it runs nothing (the CLI is bin/cutout); sharp and onnxruntime load with the first
 * image. Only what is exported here is public.
 */
export { createRemover, removeBackground, type CutoutResult, type ImageProbe, type Remover } from './library/remover.js';
export type { ImageInput, RawImage } from './library/input.js';
export type { OutputFormat, Precision, Quality, RemoveOptions, RemoverOptions, Size } from './library/options.js';
export { CutoutError, type ErrorCode } from './errors.js';
export type { ResultFields } from './result-fields.js';
export type { PreparationEvent } from './toolchain/weights.js';
