/**
 * `cutout serve --upstream URL`: the model call over the Open Inference Protocol v2 to Triton,
 * KServe, MLServer or `cutout model-server`. Chosen once at start (see `connectUpstream`); the
 * pipeline runs here and hands over only the input tensor.
 *
 * - Binary tensors (Triton's extension) when `GET /v2` lists `binary_tensor_data`, JSON otherwise.
 * - Only the output the pipeline reads is asked for (ISNet has twelve), and only it is decoded.
 * - The model names say what runs: NAME (fp32) and NAME-SIDE with precision auto or fp32, since
 *   the upstream's hardware is not ours to judge; NAME-int8 and NAME-SIDE-int8 with int8.
 * - fetch (undici) keeps its connections alive; at most `maxInFlight` requests run at once;
 *   redirects are refused, not followed; metadata and health answers are read up to a cap.
 * - Busy (503 with Retry-After, Triton's "exceeds maximum queue size", 429 or 408 from a
 *   gateway): retried with jitter within the call's deadline and the caller's signal.
 * - Unreachable, timed out (busy until the deadline included), 502, 503 without Retry-After or
 *   504: `gpu_unavailable` with Retry-After (the sync route answers 503, the job runner puts the
 *   job back in the queue). A 500 (the model raised on this input) or any other 5xx, a 4xx (our
 *   request was wrong for the model) and an unreadable answer: `processing_failed` for this
 *   request alone, never retried. Clients get a generic message; the upstream's own text (an
 *   onnxruntime error, say) goes to the server's log with the model and URL.
 */
import { CutoutError } from '../errors.js';
import { LIMITS, formatMB, inferBodyLimit } from '../limits.js';
import { Slots, busyDelayMs, errorText, networkReason, readCapped, retryAfterMs, sleep } from './http.js';
import type { ModelManifest } from '../toolchain/manifest.js';
import type { RemoteInference } from '../pipeline/model.js';
import type { Precision } from '../options.js';
import {
  BINARY_EXTENSION, HEADER_LENGTH, SERVER_MS_PARAMETER, binarySize, elementCount, expectedTensors, fp32Bytes, fp32FromBytes, fp32FromJson, metadataMismatch, splitBody, withoutCredentials,
  type Fp32Tensor, type InferenceRequest, type InferenceResponse, type ModelMetadata,
} from './protocol.js';
import { inSpan, NO_TRACING, type Tracing } from '../telemetry/tracing.js';

export interface UpstreamOptions {
  /** The upstream's base URL (what `--upstream` gave). */
  url: string;
  /** The model's name there (`--upstream-model`, default the manifest's name). */
  model: string;
  /** Requests in flight at most (`--workers`). */
  maxInFlight: number;
  /** The input sides the quality settings use besides the model's own (fast 512, balanced 768). */
  otherSides: number[];
  /** Which copy to ask for: fp32 (NAME, NAME-SIDE; the default) or int8 (NAME-int8, NAME-SIDE-int8). */
  precision?: 'fp32' | 'int8';
  /** Sent as `Authorization: Bearer TOKEN` (`--upstream-token`, a model server's `--token`). */
  token?: string | null;
  /** JSON tensors even when the server offers the binary extension (the bench compares both). */
  forceJson?: boolean;
  /** Where the upstream's own error texts go (default: stderr). */
  log?: (line: string) => void;
  /** The server's traces: each call is a client span whose `traceparent` the model server joins. */
  tracing?: Tracing;
}

export interface UpstreamHealth {
  url: string;
  model: string;
  binary: boolean;
  /** Whether /v2/health/ready answered 200 at the last probe (at most LIMITS.upstreamReadyCacheMs ago). */
  ready: boolean;
  /** Input sides served on the upstream (the model's own, and `NAME-SIDE` models found at start). */
  sides: number[];
}

/**
 * The answers that mean the server (or a proxy in front of it) is down or timed out, not that
 * this request failed: retrying later can fix them. A busy answer (`isBusy`) is retried first.
 */
const OUTAGE_STATUSES = new Set([502, 503, 504]);

/**
 * A busy server or gateway, not a down one: 429, 408, a 503 with Retry-After (ours when its
 * queue is full), and Triton's 503 for a full queue (it sends no Retry-After).
 */
function isBusy(res: Response, body: Buffer): boolean {
  if (res.status === 429 || res.status === 408) return true;
  if (res.status !== 503) return false;
  return res.headers.get('retry-after') !== null || /exceeds maximum queue size/i.test(errorText(body));
}

/** Why an upstream call failed in a way that retrying later can fix. */
function unavailable(what: string, cause?: unknown): CutoutError {
  return new CutoutError('gpu_unavailable', `The inference server is unavailable (${what}); nothing was charged. Retry shortly.`, {
    headers: { 'Retry-After': String(LIMITS.upstreamRetryAfterSeconds) }, cause, reason: 'upstream_unavailable',
  });
}

/** A redirect: refused, never followed (credentials and tensors must not go where a 3xx says). */
function isRedirect(status: number): boolean {
  return status >= 300 && status < 400;
}

export class UpstreamInference implements RemoteInference {
  readonly baseUrl: string;
  readonly shownUrl: string;
  private readonly authorization: string | null;
  private readonly slots: Slots;
  private binary = false;
  /** Input side -> the upstream's model name for it. */
  private readonly models = new Map<number, string>();
  private readyAt = 0;
  private readyValue = false;
  private probing: Promise<void> | null = null;
  private readonly log: (line: string) => void;
  /** The model server's own inference time of the last call, when it reports one (bench). */
  lastServerMs: number | null = null;

  constructor(private readonly opts: UpstreamOptions) {
    let url: URL;
    try {
      url = new URL(opts.url);
    } catch {
      throw new CutoutError('invalid_request', `--upstream must be an http(s) URL, got "${opts.url}"`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CutoutError('invalid_request', `--upstream must be an http(s) URL, got "${opts.url}"`);
    if (opts.token && (url.username || url.password)) {
      throw new CutoutError('invalid_request', '--upstream has credentials in its URL and --upstream-token is set: one Authorization header can carry only one; give one of them');
    }
    // fetch refuses URLs with credentials: they travel as Basic authentication instead.
    this.authorization = opts.token
      ? `Bearer ${opts.token}`
      : url.username || url.password
        ? `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`
        : null;
    this.shownUrl = withoutCredentials(url);
    url.username = '';
    url.password = '';
    this.baseUrl = url.href.replace(/\/+$/, '');
    this.slots = new Slots(Math.max(1, opts.maxInFlight));
    this.log = opts.log ?? ((line) => process.stderr.write(`${line}\n`));
  }

  /** The upstream's name for the model at input side `side` and this connection's precision. */
  private nameAt(manifest: ModelManifest, side: number): string {
    return `${this.opts.model}${side === manifest.input.width ? '' : `-${side}`}${this.opts.precision === 'int8' ? '-int8' : ''}`;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.authorization ? { Authorization: this.authorization, ...extra } : extra;
  }

  /** A small JSON GET (server, metadata, health): no redirects, the answer capped. */
  private async getJson(path: string, timeoutMs: number): Promise<{ status: number; body: unknown }> {
    const res = await fetch(`${this.baseUrl}${path}`, { headers: this.headers(), signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
    if (isRedirect(res.status)) {
      await res.body?.cancel().catch(() => undefined);
      return { status: res.status, body: { redirect: res.headers.get('location') } };
    }
    const limit = LIMITS.upstreamMaxMetadataBytes;
    const bytes = await readCapped(res, limit, (size) => new CutoutError('invalid_request', `${this.shownUrl} answered GET ${path} with ${size}, over the ${formatMB(limit)} a protocol answer of this kind may take`));
    const text = bytes.toString('utf8');
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    return { status: res.status, body };
  }

  /**
   * Reads the server's extensions and the model's metadata and checks them against the manifest.
   * Unreachable: gpu_unavailable (exit 1). A missing model or a mismatch: invalid_request (exit 2).
   */
  async connect(manifest: ModelManifest): Promise<void> {
    const timeout = LIMITS.upstreamStartTimeoutMs;
    const redirected = (path: string, r: { status: number; body: unknown }) => new CutoutError('invalid_request',
      `${this.shownUrl} answered GET ${path} with a redirect (${r.status} to ${String((r.body as { redirect?: unknown })?.redirect ?? 'nowhere')}); redirects are not followed: give the final URL as --upstream`);
    let server: { status: number; body: unknown };
    try {
      server = await this.getJson('/v2', timeout);
    } catch (err) {
      if (err instanceof CutoutError) throw err;
      throw unavailable(`GET ${this.shownUrl}/v2: ${networkReason(err)}`, err);
    }
    if (isRedirect(server.status)) throw redirected('/v2', server);
    if (server.status === 401 || server.status === 403) {
      throw new CutoutError('invalid_request', `${this.shownUrl} refused the credentials: GET /v2 answered ${server.status}${this.opts.token ? ' (check --upstream-token)' : '; give its token with --upstream-token'}`);
    }
    if (server.status !== 200) throw new CutoutError('invalid_request', `${this.shownUrl} is not an Open Inference Protocol server: GET /v2 answered ${server.status}`);
    const extensions = (server.body as { extensions?: unknown })?.extensions;
    this.binary = !this.opts.forceJson && Array.isArray(extensions) && extensions.includes(BINARY_EXTENSION);

    const check = async (name: string, side: number, required: boolean): Promise<boolean> => {
      const path = `/v2/models/${encodeURIComponent(name)}`;
      let meta: { status: number; body: unknown };
      try {
        meta = await this.getJson(path, timeout);
      } catch (err) {
        if (err instanceof CutoutError) throw err;
        throw unavailable(`GET /v2/models/${name}: ${networkReason(err)}`, err);
      }
      if (isRedirect(meta.status)) throw redirected(path, meta);
      // Triton answers 400 for a model it does not have, KServe and ours 404.
      if (meta.status === 404 || meta.status === 400) {
        if (!required) return false;
        if (this.opts.precision === 'int8') {
          throw new CutoutError('invalid_request', `The upstream ${this.shownUrl} has no model "${name}" (GET ${path} answered ${meta.status}): precision int8 asks for the int8 copy under that name; serve it with cutout model-server --precision int8, or use precision auto or fp32`);
        }
        throw new CutoutError('invalid_request', `The upstream ${this.shownUrl} has no model "${name}" (GET ${path} answered ${meta.status}); name it with --upstream-model`);
      }
      if (meta.status !== 200) throw unavailable(`GET /v2/models/${name} answered ${meta.status}`);
      const mismatch = metadataMismatch(meta.body as Partial<ModelMetadata>, expectedTensors(manifest, side));
      if (mismatch) throw new CutoutError('invalid_request', `The upstream model "${name}" does not fit ${manifest.name}: ${mismatch}`);
      this.models.set(side, name);
      return true;
    };
    await check(this.nameAt(manifest, manifest.input.width), manifest.input.width, true);
    for (const side of this.opts.otherSides) await check(this.nameAt(manifest, side), side, false);
    this.readyValue = true;
    this.readyAt = Date.now();
  }

  /** One model call, traced as the removal's inference span (a child of its pipeline span, the active one). */
  async run(manifest: ModelManifest, tensor: Float32Array, width: number, height: number, signal?: AbortSignal): Promise<{ data: Float32Array; dims: number[]; ms: number }> {
    const tracing = this.opts.tracing ?? NO_TRACING;
    const attributes = { 'cutout.inference.where': 'upstream', 'cutout.model': this.models.get(width), 'server.address': new URL(this.baseUrl).host };
    return inSpan(tracing, 'cutout.inference', { kind: 'client', attributes }, (span) => this.call(manifest, tensor, width, height, signal, span.headers()));
  }

  private async call(
    manifest: ModelManifest, tensor: Float32Array, width: number, height: number, signal: AbortSignal | undefined, traceHeaders: Record<string, string>,
  ): Promise<{ data: Float32Array; dims: number[]; ms: number }> {
    const model = this.models.get(width);
    if (!model) {
      throw new CutoutError('invalid_request', `This quality needs the model at a ${width} px input; the inference server has no "${this.nameAt(manifest, width)}" (served sides: ${[...this.models.keys()].join(', ')}). Use quality=best, or add that model to the inference server.`);
    }
    // The round trip counts the encoding and decoding of the tensors: they are the protocol's cost.
    const started = performance.now();
    const { input, output } = expectedTensors(manifest, width);
    const shape = [1, 3, height, width];
    const request: InferenceRequest = this.binary
      ? {
          inputs: [{ name: input.name, shape, datatype: 'FP32', parameters: { binary_data_size: tensor.byteLength } }],
          outputs: [{ name: output.name, parameters: { binary_data: true } }],
        }
      : { inputs: [{ name: input.name, shape, datatype: 'FP32', data: Array.from(tensor) }], outputs: [{ name: output.name }] };
    let body: Buffer;
    // Node's fetch asks for gzip by default; a tensor of floats barely compresses, and Triton
    // would spend CPU compressing every 4 MB matte: ask for it as is.
    const headers: Record<string, string> = { 'Accept-Encoding': 'identity', ...traceHeaders };
    if (this.binary) {
      const json = Buffer.from(JSON.stringify(request));
      body = Buffer.concat([json, fp32Bytes(tensor)]);
      headers['Content-Type'] = 'application/octet-stream';
      headers['Inference-Header-Content-Length'] = String(json.length);
    } else {
      body = Buffer.from(JSON.stringify(request));
      headers['Content-Type'] = 'application/json';
    }
    const where = `POST ${this.shownUrl}/v2/models/${model}/infer`;

    const release = await this.slots.take();
    let res: Response;
    let bytes: Buffer;
    try {
      // One deadline for the call and its retries of busy answers.
      const deadline = Date.now() + LIMITS.upstreamTimeoutMs;
      for (let attempt = 1; ; attempt++) {
        if (signal?.aborted) throw signal.reason;
        const timeout = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
        try {
          res = await fetch(`${this.baseUrl}/v2/models/${encodeURIComponent(model)}/infer`, {
            method: 'POST', headers: this.headers(headers), body, signal: signal ? AbortSignal.any([signal, timeout]) : timeout, redirect: 'manual',
          });
          // The answer can only be the matte: anything longer is refused as it streams.
          bytes = await readCapped(res, inferBodyLimit(width * height, this.binary ? 'binary' : 'json'));
        } catch (err) {
          if (signal?.aborted) throw signal.reason;
          if (err instanceof CutoutError) throw err;
          this.noteDown();
          throw unavailable(`POST /v2/models/${model}/infer: ${networkReason(err)}`, err);
        }
        if (!isBusy(res, bytes)) break;
        // Busy, not down: wait and try again while the deadline allows.
        const wait = busyDelayMs(attempt, retryAfterMs(res.headers.get('retry-after')), LIMITS.upstreamBusyFirstDelayMs, LIMITS.upstreamBusyMaxDelayMs);
        if (Date.now() + wait >= deadline) {
          this.log(`cutout serve: upstream ${where} stayed busy for ${attempt} attempt(s) until the call's deadline: ${res.status} ${errorText(bytes)}`);
          throw unavailable(`the inference server stayed busy (${res.status}) until the call's deadline`);
        }
        await sleep(wait, signal);
      }
    } finally {
      release();
    }
    if (isRedirect(res.status)) {
      this.log(`cutout serve: upstream ${where} answered ${res.status} to ${res.headers.get('location') ?? 'nowhere'}; redirects are not followed`);
      throw new CutoutError('processing_failed', `The inference server answered a redirect (${res.status}), which is not followed; nothing was charged.`);
    }
    if (OUTAGE_STATUSES.has(res.status)) {
      this.noteDown();
      this.log(`cutout serve: upstream ${where} answered ${res.status}: ${errorText(bytes)}`);
      throw unavailable(`the inference server answered ${res.status}`);
    }
    // A 500 (or any other status) is about this request: Triton and KServe answer 500 when the
    // model raises on this input, so retrying it would fail again and stall the queue.
    if (res.status !== 200) {
      this.log(`cutout serve: upstream ${where} answered ${res.status}: ${errorText(bytes)}`);
      if (res.status >= 500) throw new CutoutError('processing_failed', `The inference server failed on this image (${res.status}); nothing was charged.`);
      throw new CutoutError('processing_failed', `The inference server refused the request (${res.status}); nothing was charged.`);
    }
    let tensorOut: Fp32Tensor;
    let parsed: InferenceResponse;
    try {
      const { json, binary } = splitBody(bytes, res.headers.get(HEADER_LENGTH));
      parsed = json as InferenceResponse;
      tensorOut = outputTensor(parsed, binary, output.name);
    } catch (err) {
      this.log(`cutout serve: upstream ${where}: unreadable answer: ${(err as Error).message}`);
      throw new CutoutError('processing_failed', 'The inference server\'s answer could not be read; nothing was charged.', { cause: err });
    }
    if (tensorOut.shape.length !== 4 || tensorOut.shape[1] !== 1 || tensorOut.shape[2] !== height || tensorOut.shape[3] !== width) {
      this.log(`cutout serve: upstream ${where}: output "${output.name}" has shape [${tensorOut.shape.join(', ')}], expected [1, 1, ${height}, ${width}]`);
      throw new CutoutError('processing_failed', 'The inference server\'s output does not have the shape of the matte; nothing was charged.');
    }
    const ms = performance.now() - started;
    const serverMs = parsed.parameters?.[SERVER_MS_PARAMETER];
    this.lastServerMs = typeof serverMs === 'number' ? serverMs : null;
    this.readyValue = true;
    this.readyAt = Date.now();
    return { data: tensorOut.data, dims: tensorOut.shape, ms };
  }

  private noteDown(): void {
    this.readyValue = false;
    this.readyAt = Date.now();
  }

  /** For health: quick, cached, never throws. */
  async health(): Promise<UpstreamHealth> {
    if (Date.now() - this.readyAt > LIMITS.upstreamReadyCacheMs) {
      this.probing ??= this.getJson('/v2/health/ready', LIMITS.upstreamProbeTimeoutMs)
        .then((r) => { this.readyValue = r.status === 200; }, () => { this.readyValue = false; })
        .finally(() => {
          this.readyAt = Date.now();
          this.probing = null;
        });
      await this.probing;
    }
    return { url: this.shownUrl, model: this.opts.model, binary: this.binary, ready: this.readyValue, sides: [...this.models.keys()].sort((a, b) => a - b) };
  }

  /** The precision of the weights this connection calls (the names it asks for say which). */
  get precision(): 'fp32' | 'int8' {
    return this.opts.precision === 'int8' ? 'int8' : 'fp32';
  }

  get usesBinary(): boolean {
    return this.binary;
  }
}

/**
 * The output named `name` of an answer, decoded alone: the binary parts follow in the order of
 * `outputs`, so the ones before it are skipped by their sizes, never decoded.
 */
export function outputTensor(response: InferenceResponse, binary: Buffer, name: string): Fp32Tensor {
  if (!response || !Array.isArray(response.outputs)) throw new Error('the answer has no "outputs" array');
  let offset = 0;
  for (const o of response.outputs) {
    const size = binarySize(o?.parameters);
    if (o?.name !== name) {
      offset += size ?? 0;
      continue;
    }
    if (o.datatype !== 'FP32') throw new Error(`output "${name}" is ${String(o.datatype)}; only FP32 is supported`);
    if (!Array.isArray(o.shape) || !o.shape.every((d) => Number.isInteger(d) && d >= 0)) throw new Error(`output "${name}" has no valid shape`);
    const count = elementCount(o.shape);
    if (size === null) return { name, shape: o.shape, data: fp32FromJson(o.data, count) };
    if (size !== count * 4) throw new Error(`output "${name}": binary_data_size ${size} does not match shape [${o.shape.join(', ')}] of FP32`);
    if (offset + size > binary.length) throw new Error(`output "${name}": the body holds ${Math.max(0, binary.length - offset)} binary bytes from its offset, binary_data_size says ${size}`);
    return { name, shape: o.shape, data: fp32FromBytes(binary.subarray(offset, offset + size)) };
  }
  throw new Error(`no output "${name}" in the response`);
}

/** Connects to the upstream and checks its model; the caller then hands it to the pipeline. */
export async function connectUpstream(manifest: ModelManifest, opts: UpstreamOptions): Promise<UpstreamInference> {
  const upstream = new UpstreamInference(opts);
  await upstream.connect(manifest);
  return upstream;
}

/**
 * `serve --upstream` (and a library remover's `upstream`): connects to the configured upstream
 * and checks its model(s); the caller hands the connection to its pipeline as the model call.
 * Precision auto or fp32 asks for the fp32 names (the upstream's hardware is not ours to judge),
 * int8 for the `-int8` names, and the start fails when the upstream does not serve them.
 * The quality settings' other sides run on `NAME-SIDE` (`NAME-SIDE-int8`) models when the
 * upstream has them; otherwise those settings are refused with invalid_request.
 */
export async function connectConfiguredUpstream(
  config: { upstream: string; upstreamModel: string | null; upstreamToken?: string | null; model: string; workers: number; precision: Precision },
  options: { tracing?: Tracing } = {},
): Promise<UpstreamInference> {
  const { resolveModel } = await import('../toolchain/manifest.js');
  const { modelSide } = await import('../toolchain/variants.js');
  const { QUALITIES } = await import('../options.js');
  const manifest = resolveModel(config.model);
  const otherSides = [...new Set(QUALITIES.map((q) => modelSide(manifest, q)))].filter((s) => s !== manifest.input.width);
  return connectUpstream(manifest, {
    url: config.upstream, model: config.upstreamModel ?? manifest.name, maxInFlight: config.workers, otherSides,
    precision: config.precision === 'int8' ? 'int8' : 'fp32', token: config.upstreamToken ?? null, tracing: options.tracing,
  });
}
