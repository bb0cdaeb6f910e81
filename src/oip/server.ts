/**
 * `cutout model-server`: the local model (the same worker thread as the CLI and `serve`) over the
 * Open Inference Protocol v2 REST API, with JSON tensors and Triton's binary tensor data
 * extension, so that `serve --upstream` can point at it, or anything else that speaks the protocol.
 *
 * Models: the manifest's name at its own input side, and `NAME-SIDE` for each other side the
 * manifest lists (the variants the quality settings use), loaded on their first request.
 * Errors are `{"error": "..."}`: 400 for a malformed or wrong request, 404 for an unknown model,
 * 413 for a body larger than its model's tensor can take (`inferBodyLimit`), 503 with
 * Retry-After past LIMITS.modelServerMaxInferences requests at once, 500 when the model fails.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LIMITS, formatMB, inferBodyLimit } from '../limits.js';
import type { ModelManifest } from '../pipeline/manifest.js';
import {
  BINARY_EXTENSION, HEADER_LENGTH, SERVER_MS_PARAMETER, elementCount, expectedTensors, fp32Bytes, jsonValueBound, readTensors, shapeAdmits, splitBody,
  type InferenceRequest, type ModelMetadata, type ResponseOutput,
} from './protocol.js';

/** The local inference the server exposes: the pipeline's model call (model.ts). */
export interface LocalModel {
  loadModel(manifest: ModelManifest, side?: number): Promise<number>;
  runModel(manifest: ModelManifest, tensor: Float32Array, width: number, height: number): Promise<{ data: Float32Array; width: number; height: number; ms: number }>;
}

class ProtocolError extends Error {
  constructor(readonly status: number, message: string, readonly headers: Record<string, string> = {}) {
    super(message);
  }
}

interface ServedModel {
  name: string;
  side: number;
  manifest: ModelManifest;
}

export interface ModelServer {
  url: string;
  close(): Promise<void>;
}

const SERVER_NAME = 'cutout';

function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** The request body, refused with 413 past `limit` (by Content-Length before reading, else as it streams). */
function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(new ProtocolError(413, `request body of ${formatMB(declared)} is over the limit of ${formatMB(limit)}`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new ProtocolError(413, `request body is over the limit of ${formatMB(limit)}`));
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    // A client that went away ("aborted"): its request, not a fault of ours.
    req.on('error', (err) => reject(new ProtocolError(400, `the request body could not be read: ${err.message}`)));
    // A client that goes away mid-body frees its place (a no-op once the body was read).
    req.on('close', () => {
      if (!req.complete) reject(new ProtocolError(400, 'the client closed the connection before the body was complete'));
    });
  });
}

function metadata(m: ServedModel): ModelMetadata {
  const { input, output } = expectedTensors(m.manifest, m.side);
  return { name: m.name, versions: ['1'], platform: 'onnxruntime_onnx', inputs: [input], outputs: [output] };
}

export async function startModelServer(opts: { host: string; port: number; manifest: ModelManifest; model: LocalModel; version: string }): Promise<ModelServer> {
  const { manifest, model } = opts;
  const served = new Map<string, ServedModel>();
  served.set(manifest.name, { name: manifest.name, side: manifest.input.width, manifest });
  for (const side of manifest.sides) {
    if (side !== manifest.input.width) served.set(`${manifest.name}-${side}`, { name: `${manifest.name}-${side}`, side, manifest });
  }
  // Ready once the model's own side is loaded (verified weights, a session); variants load on use.
  let ready = false;
  const loading = model.loadModel(manifest).then(() => { ready = true; });

  const modelOf = (name: string): ServedModel => {
    const m = served.get(name);
    if (!m) throw new ProtocolError(404, `unknown model "${name}"; this server has: ${[...served.keys()].join(', ')}`);
    return m;
  };

  let inferences = 0;
  const infer = async (m: ServedModel, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    if (inferences >= LIMITS.modelServerMaxInferences) {
      throw new ProtocolError(503, `busy: ${inferences} inference requests in progress; retry shortly`, { 'Retry-After': String(LIMITS.modelServerRetryAfterSeconds) });
    }
    inferences++;
    try {
      await inferOne(m, req, res);
    } finally {
      inferences--;
    }
  };

  const inferOne = async (m: ServedModel, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const want = expectedTensors(manifest, m.side);
    const elements = elementCount(want.input.shape);
    // With Inference-Header-Content-Length the tensor is binary; without it the body is all JSON.
    const headerLength = req.headers[HEADER_LENGTH];
    const encoding = headerLength === undefined ? 'json' : 'binary';
    const body = await readBody(req, inferBodyLimit(elements, encoding));
    // Bound what JSON.parse would build before it runs: at most one value per element, plus the
    // brackets and commas of a nested array's rows, plus the header's own.
    const rows = elements / want.input.shape[want.input.shape.length - 1];
    const maxValues = (encoding === 'json' ? elements + 2 * rows : 0) + LIMITS.inferHeaderAllowanceBytes;
    const jsonPart = encoding === 'json' ? body : body.subarray(0, Math.min(body.length, Number(headerLength) || 0));
    const values = jsonValueBound(jsonPart);
    if (values > maxValues) {
      throw new ProtocolError(400, `the request's JSON holds about ${values} values; model "${m.name}" takes ${elements} elements${encoding === 'binary' ? ' (in the binary part)' : ''}`);
    }
    let request: InferenceRequest;
    let binary: Buffer;
    try {
      const split = splitBody(body, req.headers[HEADER_LENGTH]);
      request = split.json as InferenceRequest;
      binary = split.binary;
    } catch (err) {
      throw new ProtocolError(400, `malformed request body: ${(err as Error).message}`);
    }
    if (!request || typeof request !== 'object' || !Array.isArray(request.inputs)) throw new ProtocolError(400, 'the request needs an "inputs" array');
    if (request.inputs.length !== 1 || request.inputs[0]?.name !== want.input.name) {
      throw new ProtocolError(400, `model "${m.name}" takes one input, "${want.input.name}"; got: ${request.inputs.map((i) => i?.name).join(', ') || 'none'}`);
    }
    const input = request.inputs[0];
    if (input.datatype !== want.input.datatype) throw new ProtocolError(400, `input "${input.name}" must be ${want.input.datatype}, got ${String(input.datatype)}`);
    if (!Array.isArray(input.shape) || !shapeAdmits(want.input.shape, input.shape)) {
      throw new ProtocolError(400, `input "${input.name}" must have shape [${want.input.shape.join(', ')}], got [${String(input.shape)}]`);
    }
    let tensor: Float32Array;
    try {
      tensor = readTensors([input], binary)[0].data;
    } catch (err) {
      throw new ProtocolError(400, (err as Error).message);
    }
    // runModel transfers the tensor's whole ArrayBuffer to the worker thread: a view into the
    // request body becomes a tensor of its own (a 12.6 MB copy, about 3 ms).
    if (tensor.byteOffset !== 0 || tensor.byteLength !== tensor.buffer.byteLength) tensor = tensor.slice();
    // The outputs asked for (all of them when the list is absent), each binary or JSON.
    const asked = request.outputs ?? [{ name: want.output.name }];
    if (!Array.isArray(asked)) throw new ProtocolError(400, '"outputs" must be an array');
    for (const o of asked) {
      if (o?.name !== want.output.name) throw new ProtocolError(400, `unknown output "${String(o?.name)}"; model "${m.name}" has: ${want.output.name}`);
    }
    const allBinary = request.parameters?.binary_data_output === true;

    let result: Awaited<ReturnType<LocalModel['runModel']>>;
    try {
      result = await model.runModel(manifest, tensor, m.side, want.input.shape[2]);
    } catch (err) {
      throw new ProtocolError(500, `inference failed: ${(err as Error).message}`);
    }
    const shape = [1, 1, result.height, result.width];
    const parts: Buffer[] = [];
    const outputs: ResponseOutput[] = asked.map((o) => {
      const wantsBinary = typeof o.parameters?.binary_data === 'boolean' ? o.parameters.binary_data : allBinary;
      if (wantsBinary) {
        const bytes = fp32Bytes(result.data);
        parts.push(bytes);
        return { name: o.name, datatype: 'FP32', shape, parameters: { binary_data_size: bytes.length } };
      }
      return { name: o.name, datatype: 'FP32', shape, data: Array.from(result.data) };
    });
    const header = {
      model_name: m.name, model_version: '1', ...(request.id !== undefined ? { id: request.id } : {}),
      parameters: { [SERVER_MS_PARAMETER]: result.ms }, outputs,
    };
    if (parts.length === 0) {
      send(res, 200, header);
      return;
    }
    const json = Buffer.from(JSON.stringify(header));
    const total = json.length + parts.reduce((n, p) => n + p.length, 0);
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': total, 'Inference-Header-Content-Length': json.length });
    res.write(json);
    for (const p of parts) res.write(p);
    res.end();
  };

  const route = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
    const method = req.method ?? 'GET';
    const modelPath = /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?(\/ready|\/infer)?$/.exec(path);
    if (method === 'GET' && path === '/v2') {
      send(res, 200, { name: SERVER_NAME, version: opts.version, extensions: [BINARY_EXTENSION] });
    } else if (method === 'GET' && path === '/v2/health/live') {
      send(res, 200, { live: true });
    } else if (method === 'GET' && path === '/v2/health/ready') {
      send(res, ready ? 200 : 503, { ready });
    } else if (modelPath) {
      let name: string;
      try {
        name = decodeURIComponent(modelPath[1]);
      } catch {
        throw new ProtocolError(400, `malformed model name in the path: ${modelPath[1]}`);
      }
      const m = modelOf(name);
      if (modelPath[2] !== undefined && modelPath[2] !== '1') throw new ProtocolError(404, `model "${m.name}" has no version "${modelPath[2]}"; it has: 1`);
      if (method === 'GET' && modelPath[3] === undefined) send(res, 200, metadata(m));
      else if (method === 'GET' && modelPath[3] === '/ready') send(res, ready ? 200 : 503, { name: m.name, ready });
      else if (method === 'POST' && modelPath[3] === '/infer') await infer(m, req, res);
      else throw new ProtocolError(405, `${method} is not allowed on ${path}`);
    } else {
      throw new ProtocolError(404, `no route ${method} ${path}`);
    }
  };

  const server = http.createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      const status = err instanceof ProtocolError ? err.status : 500;
      if (!(err instanceof ProtocolError)) process.stderr.write(`cutout model-server: ${(err as Error)?.stack ?? String(err)}\n`);
      if (res.headersSent || res.destroyed) {
        res.destroy();
        return;
      }
      // Close a connection whose body was not read (413, 503 busy): the client may still be sending it.
      const headers = err instanceof ProtocolError ? { ...err.headers } : {};
      if (status === 413 || status === 503) headers.Connection = 'close';
      send(res, status, { error: (err as Error).message }, headers);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  try {
    await loading;
  } catch (err) {
    server.close();
    throw err;
  }
  const { port } = server.address() as AddressInfo;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${host}:${port}`,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    }),
  };
}
