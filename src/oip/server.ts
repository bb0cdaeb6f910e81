/**
 * `cutout model-server`: the local model (the same worker thread as the CLI and `serve`) over the
 * Open Inference Protocol v2 REST API, with JSON tensors and Triton's binary tensor data
 * extension, so that `serve --upstream` can point at it, or anything else that speaks the protocol.
 *
 * Models: what a name says is what runs (`modelsToServe`). `NAME` is the fp32 model at its own
 * input side, exactly the weights `models export --triton` writes; `NAME-SIDE` the fp32 copy at a
 * smaller side; `NAME-int8` and `NAME-SIDE-int8` the int8 copies, at the sides that have one.
 * `--precision` picks the set; the model at the manifest's side loads at start, the others on
 * their first request.
 *
 * Requests: a request's body is read in full (within LIMITS.modelServerBodyTimeoutMs, its bytes
 * counted against LIMITS.modelServerBodyBudgetBytes) before it takes one of
 * LIMITS.modelServerMaxInferences slots; up to LIMITS.modelServerMaxQueue read requests wait for
 * a slot in order. With a token, every endpoint but /v2/health/* needs `Authorization: Bearer`.
 * Errors are `{"error": "..."}`: 400 for a malformed or wrong request (duplicated, unknown or too
 * many outputs included), 401 without the token, 404 for an unknown model, 408 for a body not
 * sent in time, 413 for a body larger than its model's tensor can take (`inferBodyLimit`), 503
 * with Retry-After when the queue or the body budget is full, 500 when the model fails.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LIMITS, formatMB, inferBodyLimit } from '../limits.js';
import type { ModelManifest } from '../toolchain/manifest.js';
import type { Precision } from '../options.js';
import { inSpan, NO_TRACING, type TraceSpan, type Tracing } from '../telemetry/tracing.js';
import {
  BINARY_EXTENSION, HEADER_LENGTH, SERVER_MS_PARAMETER, elementCount, expectedTensors, fp32Bytes, jsonValueBound, readTensors, shapeAdmits, splitBody,
  type InferenceRequest, type ModelMetadata, type ResponseOutput,
} from './protocol.js';
/** The local inference the server exposes: the pipeline's model call (model.ts). */
export interface LocalModel {
  loadModel(manifest: ModelManifest, side?: number, precision?: Precision): Promise<number>;
  runModel(manifest: ModelManifest, tensor: Float32Array, width: number, height: number, sourcePixels?: number, precision?: Precision): Promise<{ data: Float32Array; width: number; height: number; ms: number }>;
}

/** A pipeline as the model this server runs: its model calls, at the precision each name serves. */
export function pipelineModel(pipeline: import('../pipeline/index.js').CutoutPipeline): LocalModel {
  return {
    loadModel: (_manifest, side, precision) => pipeline.loadModel({ side, precision }),
    runModel: (_manifest, tensor, width, height, sourcePixels, precision) => pipeline.runModel(tensor, width, height, { sourcePixels, precision }),
  };
}

class ProtocolError extends Error {
  constructor(readonly status: number, message: string, readonly headers: Record<string, string> = {}) {
    super(message);
  }
}

/** One model the server answers for: the name says the side and the arithmetic that run. */
export interface ServedModel {
  name: string;
  side: number;
  precision: 'fp32' | 'int8';
  manifest: ModelManifest;
}

/** The protocol name of a model at a side and precision: NAME, NAME-SIDE, NAME-int8, NAME-SIDE-int8. */
export function servedName(manifest: ModelManifest, side: number, precision: 'fp32' | 'int8', base = manifest.name): string {
  return `${base}${side === manifest.input.width ? '' : `-${side}`}${precision === 'int8' ? '-int8' : ''}`;
}

/**
 * The models a server with `--precision P` answers for, the one loaded at start first.
 * - fp32: NAME and NAME-SIDE for each other side of the manifest.
 * - int8: NAME-int8 and NAME-SIDE-int8 at the sides that have an int8 copy (`int8Sides`).
 * - auto: what `auto` runs here at each side under its own name (NAME-int8 on a CPU with VNNI,
 *   NAME elsewhere), and the fp32 names too: a model loads on its first request, so a name
 *   nobody asks for costs nothing.
 * `int8Sides`: the sides with an int8 copy; `autoAt`: what auto runs at a side on this machine.
 */
export function modelsToServe(manifest: ModelManifest, precision: Precision, int8Sides: readonly number[], autoAt: (side: number) => 'fp32' | 'int8'): ServedModel[] {
  const own = manifest.input.width;
  const sides = [own, ...manifest.sides.filter((s) => s !== own)];
  const out: ServedModel[] = [];
  const add = (side: number, p: 'fp32' | 'int8') => out.push({ name: servedName(manifest, side, p), side, precision: p, manifest });
  if (precision === 'int8') {
    for (const side of sides) if (int8Sides.includes(side)) add(side, 'int8');
    return out;
  }
  if (precision === 'auto') for (const side of sides) if (autoAt(side) === 'int8' && int8Sides.includes(side)) add(side, 'int8');
  for (const side of sides) add(side, 'fp32');
  return out;
}

export interface ModelServer {
  url: string;
  close(): Promise<void>;
}

export interface ModelServerOptions {
  host: string;
  port: number;
  manifest: ModelManifest;
  model: LocalModel;
  version: string;
  /** The models answered for, the first one loaded at start (`modelsToServe`). */
  models: ServedModel[];
  /** Every endpoint but /v2/health/* requires `Authorization: Bearer TOKEN`; null: open. */
  token?: string | null;
  /** Overrides of the LIMITS.modelServer* numbers (tests). */
  limits?: Partial<ServerLimits>;
  /** Traces (src/telemetry/): each inference a span that joins the caller's trace by its `traceparent`. */
  tracing?: Tracing;
}

interface ServerLimits {
  maxInferences: number;
  maxQueue: number;
  bodyBudgetBytes: number;
  bodyTimeoutMs: number;
  headersTimeoutMs: number;
}

const SERVER_NAME = 'cutout';

function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function busy(what: string): ProtocolError {
  return new ProtocolError(503, `busy: ${what}; retry after ${LIMITS.modelServerRetryAfterSeconds} s`, { 'Retry-After': String(LIMITS.modelServerRetryAfterSeconds) });
}

/** The bytes of request bodies the server holds at once, against a budget. */
class BodyBudget {
  held = 0;
  constructor(readonly limit: number) {}
}

/**
 * The request body, refused with 413 past `limit` (by Content-Length before reading, else as it
 * streams), 408 when it is not complete `timeoutMs` after the headers, 503 when its bytes would
 * take the server's bodies past their budget. `hold`: the bytes this request counts against the
 * budget until it is answered (the caller gives them back).
 */
function readBody(req: http.IncomingMessage, limit: number, timeoutMs: number, budget: BodyBudget, hold: { bytes: number }): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    return Promise.reject(new ProtocolError(413, `request body of ${formatMB(declared)} is over the limit of ${formatMB(limit)}`));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const stop = (err: ProtocolError | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.removeListener('data', onData);
      if (err) {
        chunks.length = 0;
        req.resume();
        reject(err);
      } else {
        resolve(Buffer.concat(chunks));
      }
    };
    const timer = setTimeout(() => stop(new ProtocolError(408, `the request body was not complete within ${timeoutMs / 1000} s`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return stop(new ProtocolError(413, `request body is over the limit of ${formatMB(limit)}`));
      if (budget.held + chunk.length > budget.limit) return stop(busy(`${formatMB(budget.held)} of request bodies held, the limit is ${formatMB(budget.limit)}`));
      budget.held += chunk.length;
      hold.bytes += chunk.length;
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => stop(null));
    // A client that went away ("aborted"): its request, not a fault of ours.
    req.on('error', (err) => stop(new ProtocolError(400, `the request body could not be read: ${err.message}`)));
    // A client that goes away mid-body frees its bytes (a no-op once the body was read).
    req.on('close', () => {
      if (!req.complete) stop(new ProtocolError(400, 'the client closed the connection before the body was complete'));
    });
  });
}

/**
 * The inference slots and their queue: `take` resolves with a release once a slot is free, in
 * order of arrival; refused with 503 when `maxQueue` requests already wait; a request whose
 * client goes away while it waits leaves the queue.
 */
class InferenceSlots {
  running = 0;
  private readonly waiting: { grant: () => void }[] = [];
  constructor(private readonly size: number, private readonly maxQueue: number) {}

  get queued(): number {
    return this.waiting.length;
  }

  async take(res: http.ServerResponse): Promise<() => void> {
    if (this.running < this.size) {
      this.running++;
    } else {
      if (this.waiting.length >= this.maxQueue) throw busy(`${this.running} running and ${this.waiting.length} waiting for a slot`);
      await new Promise<void>((resolve, reject) => {
        const entry = { grant: () => { res.off('close', gone); resolve(); } };
        const gone = () => {
          const i = this.waiting.indexOf(entry);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(new ProtocolError(400, 'the client went away while its request waited'));
        };
        res.once('close', gone);
        this.waiting.push(entry);
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next.grant(); // the slot passes on: `running` stays
      else this.running--;
    };
  }
}

/** Constant-time check of `Authorization: Bearer TOKEN` (hashes first: equal lengths for timingSafeEqual). */
function bearerMatches(header: string | undefined, tokenHash: Buffer): boolean {
  const m = /^Bearer +(\S+) *$/i.exec(header ?? '');
  const given = crypto.createHash('sha256').update(m ? m[1] : '').digest();
  return crypto.timingSafeEqual(given, tokenHash) && m !== null;
}

function metadata(m: ServedModel): ModelMetadata {
  const { input, output } = expectedTensors(m.manifest, m.side);
  return { name: m.name, versions: ['1'], platform: 'onnxruntime_onnx', inputs: [input], outputs: [output] };
}

/** What the request handlers share: the models, the token, the slots, the body budget, readiness. */
interface ServerState {
  opts: ModelServerOptions;
  limits: ServerLimits;
  served: ReadonlyMap<string, ServedModel>;
  tokenHash: Buffer | null;
  slots: InferenceSlots;
  budget: BodyBudget;
  /** True once the first model is loaded. */
  ready: boolean;
}

/** The LIMITS.modelServer* numbers, with the options' overrides (tests). */
function serverLimits(overrides: Partial<ServerLimits> | undefined): ServerLimits {
  return {
    maxInferences: LIMITS.modelServerMaxInferences, maxQueue: LIMITS.modelServerMaxQueue, bodyBudgetBytes: LIMITS.modelServerBodyBudgetBytes,
    bodyTimeoutMs: LIMITS.modelServerBodyTimeoutMs, headersTimeoutMs: LIMITS.modelServerHeadersTimeoutMs, ...overrides,
  };
}

function modelOf(state: ServerState, name: string): ServedModel {
  const m = state.served.get(name);
  if (!m) throw new ProtocolError(404, `unknown model "${name.slice(0, 200)}"; this server has: ${[...state.served.keys()].join(', ')}`);
  return m;
}

/**
 * The span of one inference request, a child of the caller's (`traceparent`: serve --upstream's
 * inference span), ended with its answer. Health probes and metadata reads are not traced.
 */
function traceInference(tracing: Tracing, m: ServedModel, req: http.IncomingMessage, res: http.ServerResponse): TraceSpan {
  const route = '/v2/models/{model}/infer';
  const span = tracing.startFromHeaders(`POST ${route}`, req.headers, {
    kind: 'server', attributes: { 'http.request.method': 'POST', 'http.route': route, 'cutout.model': m.name, 'cutout.precision': m.precision },
  });
  const finish = () => {
    span.setAttributes({ 'http.response.status_code': res.statusCode });
    if (res.statusCode >= 500) span.fail({ code: String(res.statusCode) });
    span.end();
  };
  res.once('finish', finish);
  res.once('close', finish);
  return span;
}

/** POST .../infer: the whole body first, without a slot (a client that stalls mid-body holds only its bytes), then a slot. */
async function infer(state: ServerState, m: ServedModel, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const tracing = state.opts.tracing ?? NO_TRACING;
  if (tracing.enabled) {
    const span = traceInference(tracing, m, req, res);
    return tracing.within(span, () => inferTraced(state, m, req, res, tracing));
  }
  return inferTraced(state, m, req, res, tracing);
}

async function inferTraced(state: ServerState, m: ServedModel, req: http.IncomingMessage, res: http.ServerResponse, tracing: Tracing): Promise<void> {
  const want = expectedTensors(state.opts.manifest, m.side);
  const elements = elementCount(want.input.shape);
  // With Inference-Header-Content-Length the tensor is binary; without it the body is all JSON.
  const encoding = req.headers[HEADER_LENGTH] === undefined ? 'json' : 'binary';
  const hold = { bytes: 0 };
  try {
    const body = await readBody(req, inferBodyLimit(elements, encoding), state.limits.bodyTimeoutMs, state.budget, hold);
    const release = await inSpan(tracing, 'cutout.model_server.wait', {}, () => state.slots.take(res));
    try {
      await inSpan(tracing, 'cutout.model_server.run', {}, () => inferOne(state, m, req, res, body, encoding));
    } finally {
      release();
    }
  } finally {
    state.budget.held -= hold.bytes;
  }
}

type Tensors = ReturnType<typeof expectedTensors>;
type AskedOutput = NonNullable<InferenceRequest['outputs']>[number];

/** A request read and checked: its JSON, the outputs it asks for, and its input tensor. */
interface CheckedRequest {
  request: InferenceRequest;
  asked: AskedOutput[];
  tensor: Float32Array;
}

/** One inference, its body read and a slot held: the request checked, the model run, the answer written. */
async function inferOne(state: ServerState, m: ServedModel, req: http.IncomingMessage, res: http.ServerResponse, body: Buffer, encoding: 'json' | 'binary'): Promise<void> {
  const want = expectedTensors(state.opts.manifest, m.side);
  const checked = checkedRequest(m, want, req.headers[HEADER_LENGTH], body, encoding);
  let result: Awaited<ReturnType<LocalModel['runModel']>>;
  try {
    result = await state.opts.model.runModel(state.opts.manifest, checked.tensor, m.side, want.input.shape[2], 0, m.precision);
  } catch (err) {
    // The detail is for the operator's log; the client gets the model's one line too (its own request).
    process.stderr.write(`cutout model-server: inference failed on model "${m.name}": ${(err as Error)?.message ?? String(err)}\n`);
    throw new ProtocolError(500, `inference failed: ${(err as Error).message}`);
  }
  writeAnswer(res, m, checked, result);
}

/** The request body parsed and checked against the model's tensors (400 for what does not fit). */
function checkedRequest(m: ServedModel, want: Tensors, headerLength: string | string[] | undefined, body: Buffer, encoding: 'json' | 'binary'): CheckedRequest {
  const elements = elementCount(want.input.shape);
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
    const split = splitBody(body, headerLength);
    request = split.json as InferenceRequest;
    binary = split.binary;
  } catch (err) {
    throw new ProtocolError(400, `malformed request body: ${(err as Error).message}`);
  }
  if (!request || typeof request !== 'object' || !Array.isArray(request.inputs)) throw new ProtocolError(400, 'the request needs an "inputs" array');
  if (request.id !== undefined && (typeof request.id !== 'string' || request.id.length > LIMITS.modelServerMaxIdLength)) {
    throw new ProtocolError(400, `"id" must be a string of at most ${LIMITS.modelServerMaxIdLength} characters`);
  }
  if (request.inputs.length !== 1 || request.inputs[0]?.name !== want.input.name) {
    throw new ProtocolError(400, `model "${m.name}" takes one input, "${want.input.name}"; got: ${request.inputs.slice(0, 5).map((i) => String(i?.name).slice(0, 100)).join(', ') || 'none'}${request.inputs.length > 5 ? ', ...' : ''}`);
  }
  const asked = askedOutputs(m, want, request);
  return { request, asked, tensor: inputTensor(want, request.inputs[0], binary) };
}

/**
 * The outputs asked for (all of them when the list is absent), each binary or JSON: each output
 * at most once, so an answer is never more than the one matte.
 */
function askedOutputs(m: ServedModel, want: Tensors, request: InferenceRequest): AskedOutput[] {
  const asked = request.outputs ?? [{ name: want.output.name }];
  if (!Array.isArray(asked)) throw new ProtocolError(400, '"outputs" must be an array');
  if (asked.length > 1) {
    const names = asked.map((o) => o?.name);
    const unknown = names.find((n) => n !== want.output.name);
    if (unknown !== undefined) throw new ProtocolError(400, `unknown output "${String(unknown).slice(0, 100)}"; model "${m.name}" has: ${want.output.name}`);
    throw new ProtocolError(400, `output "${want.output.name}" is asked for ${asked.length} times; ask for each output once (model "${m.name}" has one output)`);
  }
  for (const o of asked) {
    if (!o || typeof o !== 'object' || o.name !== want.output.name) throw new ProtocolError(400, `unknown output "${String(o?.name).slice(0, 100)}"; model "${m.name}" has: ${want.output.name}`);
  }
  return asked;
}

/** The input's tensor, checked for its datatype and shape, in a buffer of its own. */
function inputTensor(want: Tensors, input: InferenceRequest['inputs'][number], binary: Buffer): Float32Array {
  if (input.datatype !== want.input.datatype) throw new ProtocolError(400, `input "${input.name}" must be ${want.input.datatype}, got ${String(input.datatype).slice(0, 100)}`);
  if (!Array.isArray(input.shape) || !shapeAdmits(want.input.shape, input.shape)) {
    throw new ProtocolError(400, `input "${input.name}" must have shape [${want.input.shape.join(', ')}], got [${String(input.shape).slice(0, 100)}]`);
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
  return tensor;
}

/** The answer: the matte as each output asked for it (JSON, or binary after the JSON header). */
function writeAnswer(res: http.ServerResponse, m: ServedModel, checked: CheckedRequest, result: Awaited<ReturnType<LocalModel['runModel']>>): void {
  const { request, asked } = checked;
  const allBinary = request.parameters?.binary_data_output === true;
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
  const json = Buffer.from(JSON.stringify(header));
  const total = json.length + parts.reduce((n, p) => n + p.length, 0);
  // Never more than one matte can take (the checks above make it so; this keeps it so).
  const answerLimit = inferBodyLimit(result.width * result.height, parts.length > 0 ? 'binary' : 'json');
  if (total > answerLimit) throw new ProtocolError(500, `the answer would be ${formatMB(total)}, over the ${formatMB(answerLimit)} a matte can take`);
  if (parts.length === 0) {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': json.length });
    res.end(json);
    return;
  }
  res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': total, 'Inference-Header-Content-Length': json.length });
  res.write(json);
  for (const p of parts) res.write(p);
  res.end();
}

/** The protocol's routes; a token, when set, is asked of all but /v2/health/*. */
async function route(state: ServerState, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
  const method = req.method ?? 'GET';
  // Health stays open (load balancers and Kubernetes probes carry no token); the rest needs it.
  if (state.tokenHash && !path.startsWith('/v2/health/') && !bearerMatches(req.headers.authorization, state.tokenHash)) {
    throw new ProtocolError(401, 'this model server needs "Authorization: Bearer TOKEN" (its --token)', { 'WWW-Authenticate': 'Bearer' });
  }
  const modelPath = /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?(\/ready|\/infer)?$/.exec(path);
  if (method === 'GET' && path === '/v2') {
    send(res, 200, { name: SERVER_NAME, version: state.opts.version, extensions: [BINARY_EXTENSION] });
  } else if (method === 'GET' && path === '/v2/health/live') {
    send(res, 200, { live: true });
  } else if (method === 'GET' && path === '/v2/health/ready') {
    send(res, state.ready ? 200 : 503, { ready: state.ready });
  } else if (modelPath) {
    await modelRoute(state, req, res, modelPath, { method, path });
  } else {
    throw new ProtocolError(404, `no route ${method} ${path.slice(0, 200)}`);
  }
}

/** /v2/models/NAME[/versions/1][/ready|/infer]: `match` is the path's [name, version, action]. */
async function modelRoute(state: ServerState, req: http.IncomingMessage, res: http.ServerResponse, match: RegExpExecArray, at: { method: string; path: string }): Promise<void> {
  let name: string;
  try {
    name = decodeURIComponent(match[1]);
  } catch {
    throw new ProtocolError(400, `malformed model name in the path: ${match[1].slice(0, 200)}`);
  }
  const m = modelOf(state, name);
  if (match[2] !== undefined && match[2] !== '1') throw new ProtocolError(404, `model "${m.name}" has no version "${match[2].slice(0, 100)}"; it has: 1`);
  if (at.method === 'GET' && match[3] === undefined) send(res, 200, metadata(m));
  else if (at.method === 'GET' && match[3] === '/ready') send(res, state.ready ? 200 : 503, { name: m.name, ready: state.ready });
  else if (at.method === 'POST' && match[3] === '/infer') await infer(state, m, req, res);
  else throw new ProtocolError(405, `${at.method} is not allowed on ${at.path}`);
}

/** A request's failure as its answer: `{"error"}` with the error's status (500 for an unexpected one, logged). */
function answerError(req: http.IncomingMessage, res: http.ServerResponse, err: unknown): void {
  const status = err instanceof ProtocolError ? err.status : 500;
  if (!(err instanceof ProtocolError)) process.stderr.write(`cutout model-server: ${(err as Error)?.stack ?? String(err)}\n`);
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  // A body not read in full: too large (413) or too slow (408), the connection closes; any
  // other (401, 503 over the body budget) is read to its end and dropped by node once the
  // answer is sent, so that the client, still sending, gets the answer and not a reset.
  const headers = err instanceof ProtocolError ? { ...err.headers } : {};
  if (!req.complete && (status === 408 || status === 413)) headers.Connection = 'close';
  send(res, status, { error: (err as Error).message }, headers);
}

function createHttpServer(state: ServerState): http.Server {
  return http.createServer({
    // The headers within their own deadline; node's whole-request deadline a backstop behind ours
    // (readBody's), checked every second rather than node's default 30.
    headersTimeout: state.limits.headersTimeoutMs,
    requestTimeout: Math.max(state.limits.headersTimeoutMs, state.limits.bodyTimeoutMs) + 5_000,
    connectionsCheckingInterval: LIMITS.modelServerTimeoutCheckMs,
  }, (req, res) => {
    route(state, req, res).catch((err: unknown) => answerError(req, res, err));
  });
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export async function startModelServer(opts: ModelServerOptions): Promise<ModelServer> {
  if (opts.models.length === 0) throw new Error('startModelServer: no models to serve');
  const limits = serverLimits(opts.limits);
  const state: ServerState = {
    opts, limits,
    served: new Map<string, ServedModel>(opts.models.map((m) => [m.name, m])),
    tokenHash: opts.token ? crypto.createHash('sha256').update(opts.token).digest() : null,
    slots: new InferenceSlots(limits.maxInferences, limits.maxQueue),
    budget: new BodyBudget(limits.bodyBudgetBytes),
    ready: false,
  };
  // Ready once the first model is loaded (verified weights, a session); the others load on use.
  const first = opts.models[0];
  const loading = opts.model.loadModel(opts.manifest, first.side, first.precision).then(() => { state.ready = true; });
  const server = createHttpServer(state);
  await listen(server, opts.port, opts.host);
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
