/**
 * The Open Inference Protocol v2 (KServe v2 / Triton) as cutout speaks it: the JSON shapes, the
 * tensors a manifest implies, and the two encodings of tensor data on HTTP/REST: JSON arrays, and
 * Triton's binary tensor data extension (the JSON header, then the raw little-endian tensors, the
 * header's length in `Inference-Header-Content-Length`). Pure functions: the client (client.ts)
 * and our model server (server.ts) both use them.
 */
import type { ModelManifest } from '../toolchain/manifest.js';

/** The extension name a server lists in `GET /v2` when it takes and gives binary tensors. */
export const BINARY_EXTENSION = 'binary_tensor_data';
/** Header giving the JSON part's length when a body carries binary tensors after it. */
export const HEADER_LENGTH = 'inference-header-content-length';
/**
 * Response parameter with the model server's own inference time in ms (ours sets it; Triton does
 * not): the client subtracts it from the round trip to measure the protocol's overhead.
 */
export const SERVER_MS_PARAMETER = 'cutout_inference_ms';

export interface TensorMetadata {
  name: string;
  datatype: string;
  /** -1 for a dimension of any size. */
  shape: number[];
}

export interface ModelMetadata {
  name: string;
  versions?: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

export type Parameters = Record<string, unknown>;

export interface RequestInput {
  name: string;
  shape: number[];
  datatype: string;
  parameters?: Parameters;
  data?: unknown;
}

export interface RequestOutput {
  name: string;
  parameters?: Parameters;
}

export interface InferenceRequest {
  id?: string;
  parameters?: Parameters;
  inputs: RequestInput[];
  outputs?: RequestOutput[];
}

export interface ResponseOutput {
  name: string;
  shape: number[];
  datatype: string;
  parameters?: Parameters;
  data?: unknown;
}

export interface InferenceResponse {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Parameters;
  outputs: ResponseOutput[];
}

/** A decoded FP32 tensor. */
export interface Fp32Tensor {
  name: string;
  shape: number[];
  data: Float32Array;
}

/**
 * The tensors cutout's pipeline exchanges with a model whose input side is `side`: one FP32 NCHW
 * RGB input, and the one FP32 output it reads, a single-channel matte on the same grid.
 */
export function expectedTensors(manifest: ModelManifest, side: number): { input: TensorMetadata; output: TensorMetadata } {
  const native = side === manifest.input.width;
  const height = native ? manifest.input.height : side;
  return {
    input: { name: manifest.input.name, datatype: 'FP32', shape: [1, 3, height, side] },
    output: { name: manifest.output.name, datatype: 'FP32', shape: [1, 1, height, side] },
  };
}

/** True when `declared` (with -1 as a wildcard) admits `actual`. */
export function shapeAdmits(declared: number[], actual: number[]): boolean {
  return declared.length === actual.length && declared.every((d, i) => d === -1 || d === actual[i]);
}

/**
 * What is wrong with a model's metadata for the tensors we need, in one line; null when it fits.
 * Other inputs and outputs (ISNet has eleven more outputs) are allowed: we ask for ours by name.
 */
export function metadataMismatch(meta: Partial<ModelMetadata>, want: { input: TensorMetadata; output: TensorMetadata }): string | null {
  const check = (kind: 'input' | 'output', list: unknown, expected: TensorMetadata): string | null => {
    const found = Array.isArray(list) ? (list as TensorMetadata[]).find((t) => t?.name === expected.name) : undefined;
    if (!found) {
      const names = Array.isArray(list) ? (list as TensorMetadata[]).map((t) => t?.name).join(', ') : 'none';
      return `no ${kind} named "${expected.name}" (it has: ${names || 'none'})`;
    }
    if (found.datatype !== expected.datatype) return `${kind} "${expected.name}" is ${found.datatype}, expected ${expected.datatype}`;
    if (!Array.isArray(found.shape) || !shapeAdmits(found.shape, expected.shape)) {
      return `${kind} "${expected.name}" has shape [${String(found.shape)}], expected [${expected.shape.join(', ')}]`;
    }
    return null;
  };
  return check('input', meta.inputs, want.input) ?? check('output', meta.outputs, want.output);
}

export function elementCount(shape: number[]): number {
  return shape.reduce((n, d) => n * d, 1);
}

/** Raw little-endian bytes of a Float32Array (a view, no copy, on little-endian machines). */
export function fp32Bytes(data: Float32Array): Buffer {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * A Float32Array over `bytes`: a view when the offset is 4-aligned, else a copy (a binary tensor
 * follows a JSON header of any length, so its offset in the body is rarely aligned).
 */
export function fp32FromBytes(bytes: Uint8Array): Float32Array {
  if (bytes.byteLength % 4 !== 0) throw new Error(`binary FP32 data of ${bytes.byteLength} bytes is not a whole number of elements`);
  if (bytes.byteOffset % 4 === 0) return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Float32Array(copy.buffer);
}

/**
 * JSON tensor data, flat or nested in row-major order as the protocol allows, as FP32. Walks the
 * nesting and writes into the result as it goes (no flattened copy), and stops at the first
 * element past `count`: a body of the right size but too many elements costs nothing more.
 */
export function fp32FromJson(data: unknown, count: number): Float32Array {
  if (!Array.isArray(data)) throw new Error('tensor "data" must be an array');
  const out = new Float32Array(count);
  let n = 0;
  const walk = (list: unknown[]): void => {
    for (const v of list) {
      if (Array.isArray(v)) {
        walk(v);
        continue;
      }
      if (n >= count) throw new Error(`tensor "data" has more than ${count} elements, the shape needs ${count}`);
      if (typeof v !== 'number') throw new Error(`tensor "data" element ${n} is not a number`);
      out[n++] = v;
    }
  };
  walk(data);
  if (n !== count) throw new Error(`tensor "data" has ${n} elements, the shape needs ${count}`);
  return out;
}

/**
 * How many JSON values a body could hold, counted before it is parsed: its commas and opening
 * brackets (one per array or value after the first). JSON.parse of a body of tiny arrays or
 * numbers makes an object per value, so a body within its byte limit can still take gigabytes;
 * a caller refuses a body whose count is past what its tensor needs. Commas inside strings count
 * too, which only errs on the side of refusing.
 */
export function jsonValueBound(body: Uint8Array): number {
  let n = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === 0x2c || c === 0x5b) n++;
  }
  return n;
}

/** A JSON header followed by binary parts: the body and the header's length. */
export function joinBinaryBody(header: unknown, parts: Uint8Array[]): { body: Buffer; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header));
  return { body: Buffer.concat([json, ...parts]), headerLength: json.length };
}

/**
 * Splits a body into its JSON header and the binary bytes after it. `headerLength` comes from
 * `Inference-Header-Content-Length`; absent, the whole body is JSON.
 */
export function splitBody(body: Buffer, headerLength: string | string[] | null | undefined): { json: unknown; binary: Buffer } {
  const raw = Array.isArray(headerLength) ? headerLength[0] : headerLength;
  if (raw === undefined || raw === null || raw === '') return { json: JSON.parse(body.toString('utf8')), binary: Buffer.alloc(0) };
  const length = Number(raw);
  if (!Number.isInteger(length) || length < 0 || length > body.length) throw new Error(`Inference-Header-Content-Length ${raw} does not fit a body of ${body.length} bytes`);
  return { json: JSON.parse(body.subarray(0, length).toString('utf8')), binary: body.subarray(length) };
}

/** The `binary_data_size` parameter of a tensor, or null when its data is JSON. */
export function binarySize(parameters: Parameters | undefined): number | null {
  const size = parameters?.binary_data_size;
  if (size === undefined) return null;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 0) throw new Error('binary_data_size must be a non-negative integer');
  return size;
}

/**
 * Reads the FP32 tensors of a request's inputs or a response's outputs, in order: a tensor with
 * `binary_data_size` takes the next bytes of `binary`, the others their JSON `data`.
 */
export function readTensors(list: (RequestInput | ResponseOutput)[], binary: Buffer): Fp32Tensor[] {
  let offset = 0;
  const out = list.map((t) => {
    if (t.datatype !== 'FP32') throw new Error(`tensor "${t.name}" is ${t.datatype}; only FP32 is supported`);
    if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isInteger(d) && d >= 0)) throw new Error(`tensor "${t.name}" has no valid shape`);
    const count = elementCount(t.shape);
    const size = binarySize(t.parameters);
    if (size === null) return { name: t.name, shape: t.shape, data: fp32FromJson(t.data, count) };
    if (size !== count * 4) throw new Error(`tensor "${t.name}": binary_data_size ${size} does not match shape [${t.shape.join(', ')}] of FP32 (${count * 4} bytes)`);
    if (offset + size > binary.length) throw new Error(`tensor "${t.name}": the body holds ${binary.length - offset} binary bytes, binary_data_size says ${size}`);
    const data = fp32FromBytes(binary.subarray(offset, offset + size));
    offset += size;
    return { name: t.name, shape: t.shape, data };
  });
  if (offset !== binary.length) throw new Error(`the body has ${binary.length - offset} binary bytes that no tensor claims`);
  return out;
}

/** A URL's origin and path without its user and password (for health and messages). */
export function withoutCredentials(url: URL): string {
  const shown = new URL(url.href);
  shown.username = '';
  shown.password = '';
  return shown.href.replace(/\/+$/, '');
}
