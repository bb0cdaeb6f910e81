/**
 * The package's entry: `import { removeBackground, createRemover, CutoutError } from 'cutout'`.
 * Importing it runs nothing (the CLI is bin/cutout); sharp and onnxruntime load with the first
 * image. Only what is exported here is public.
 */
export { createRemover, removeBackground, type CutoutResult, type Remover } from './library/remover.js';
export type { ImageInput, RawImage } from './library/input.js';
export type { RemoveOptions, RemoverOptions } from './library/options.js';
export { CutoutError, type ErrorCode } from './errors.js';
export type { ImageProbe, InputFormat, OutputFormat } from './pipeline/types.js';
export type { PreparationEvent } from './pipeline/weights.js';
export type { Precision, Quality, Size } from './options.js';
