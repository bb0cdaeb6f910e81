/**
 * `cutout serve --upstream URL`: the model call over the Open Inference Protocol v2 to Triton,
 * KServe, MLServer or `cutout model-server`. Chosen once at start (see `connectUpstream`); the
 * pipeline runs here and hands over only the input tensor.
 *
 * - Binary tensors (Triton's extension) when `GET /v2` lists `binary_tensor_data`, JSON otherwise.
 * - Only the output the pipeline reads is asked for: ISNet has twelve.
 * - fetch (undici) keeps its connections alive; at most `maxInFlight` requests run at once.
 * - Unreachable, timed out, 502, 503 or 504: `gpu_unavailable` with Retry-After (the sync route
 *   answers 503, the job runner puts the job back in the queue). A 500 (the model raised on this
 *   input) or any other 5xx, and a 4xx (our request was wrong for the model): `processing_failed`
 *   for this request alone, never retried.
 */
import { CutoutError } from '../errors.js';
import { LIMITS, inferBodyLimit } from '../limits.js';
import { Slots, errorText, networkReason, readCapped } from './http.js';
import type { ModelManifest } from '../pipeline/manifest.js';
import type { RemoteInference } from '../pipeline/model.js';
import type { Precision } from '../options.js';
import {
  BINARY_EXTENSION, HEADER_LENGTH, SERVER_MS_PARAMETER, expectedTensors, fp32Bytes, metadataMismatch, readTensors, splitBody, withoutCredentials,
  type InferenceRequest, type InferenceResponse, type ModelMetadata,
} from './protocol.js';

export interface UpstreamOptions {
  /** The upstream's base URL (what `--upstream` gave). */
  url: string;
  /** The model's name there (`--upstream-model`, default the manifest's name). */
  model: string;
  /** Requests in flight at most (`--workers`). */
  maxInFlight: number;
  /** The input sides the quality settings use besides the model's own (fast 512, balanced 768). */
  otherSides: number[];
  /** JSON tensors even when the server offers the binary extension (the bench compares both). */
  forceJson?: boolean;
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
 * The answers that mean the server (or a proxy in front of it) is down, overloaded or timed out,
 * not that this request failed: retrying later can fix them.
 */
const OUTAGE_STATUSES = new Set([502, 503, 504]);

/** Why an upstream call failed in a way that retrying later can fix. */
function unavailable(what: string, cause?: unknown): CutoutError {
  return new CutoutError('gpu_unavailable', `The inference server is unavailable (${what}); nothing was charged. Retry shortly.`, {
    headers: { 'Retry-After': String(LIMITS.upstreamRetryAfterSeconds) }, cause,
  });
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
    // fetch refuses URLs with credentials: they travel as Basic authentication instead.
    this.authorization = url.username || url.password
      ? `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`
      : null;
    this.shownUrl = withoutCredentials(url);
    url.username = '';
    url.password = '';
    this.baseUrl = url.href.replace(/\/+$/, '');
    this.slots = new Slots(Math.max(1, opts.maxInFlight));
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.authorization ? { Authorization: this.authorization, ...extra } : extra;
  }

  private async getJson(path: string, timeoutMs: number): Promise<{ status: number; body: unknown }> {
    const res = await fetch(`${this.baseUrl}${path}`, { headers: this.headers(), signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
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
    let server: { status: number; body: unknown };
    try {
      server = await this.getJson('/v2', timeout);
    } catch (err) {
      throw unavailable(`GET ${this.shownUrl}/v2: ${networkReason(err)}`, err);
    }
    if (server.status !== 200) throw new CutoutError('invalid_request', `${this.shownUrl} is not an Open Inference Protocol server: GET /v2 answered ${server.status}`);
    const extensions = (server.body as { extensions?: unknown })?.extensions;
    this.binary = !this.opts.forceJson && Array.isArray(extensions) && extensions.includes(BINARY_EXTENSION);

    const check = async (name: string, side: number, required: boolean): Promise<boolean> => {
      let meta: { status: number; body: unknown };
      try {
        meta = await this.getJson(`/v2/models/${encodeURIComponent(name)}`, timeout);
      } catch (err) {
        throw unavailable(`GET /v2/models/${name}: ${networkReason(err)}`, err);
      }
      // Triton answers 400 for a model it does not have, KServe and ours 404.
      if (meta.status === 404 || meta.status === 400) {
        if (!required) return false;
        throw new CutoutError('invalid_request', `The upstream ${this.shownUrl} has no model "${name}" (GET /v2/models/${name} answered ${meta.status}); name it with --upstream-model`);
      }
      if (meta.status !== 200) throw unavailable(`GET /v2/models/${name} answered ${meta.status}`);
      const mismatch = metadataMismatch(meta.body as Partial<ModelMetadata>, expectedTensors(manifest, side));
      if (mismatch) throw new CutoutError('invalid_request', `The upstream model "${name}" does not fit ${manifest.name}: ${mismatch}`);
      this.models.set(side, name);
      return true;
    };
    await check(this.opts.model, manifest.input.width, true);
    for (const side of this.opts.otherSides) await check(`${this.opts.model}-${side}`, side, false);
    this.readyValue = true;
    this.readyAt = Date.now();
  }

  async run(manifest: ModelManifest, tensor: Float32Array, width: number, height: number, signal?: AbortSignal): Promise<{ data: Float32Array; dims: number[]; ms: number }> {
    const model = this.models.get(width);
    if (!model) {
      throw new CutoutError('invalid_request', `This quality needs the model at a ${width} px input; the inference server has no "${this.opts.model}-${width}" (served sides: ${[...this.models.keys()].join(', ')}). Use quality=best, or add that model to the inference server.`);
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
    const headers: Record<string, string> = { 'Accept-Encoding': 'identity' };
    if (this.binary) {
      const json = Buffer.from(JSON.stringify(request));
      body = Buffer.concat([json, fp32Bytes(tensor)]);
      headers['Content-Type'] = 'application/octet-stream';
      headers['Inference-Header-Content-Length'] = String(json.length);
    } else {
      body = Buffer.from(JSON.stringify(request));
      headers['Content-Type'] = 'application/json';
    }

    const release = await this.slots.take();
    let res: Response;
    let bytes: Buffer;
    try {
      if (signal?.aborted) throw signal.reason;
      const timeout = AbortSignal.timeout(LIMITS.upstreamTimeoutMs);
      try {
        res = await fetch(`${this.baseUrl}/v2/models/${encodeURIComponent(model)}/infer`, {
          method: 'POST', headers: this.headers(headers), body, signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        });
        // The answer can only be the matte: anything longer is refused as it streams.
        bytes = await readCapped(res, inferBodyLimit(width * height, this.binary ? 'binary' : 'json'));
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (err instanceof CutoutError) throw err;
        this.noteDown();
        throw unavailable(`POST /v2/models/${model}/infer: ${networkReason(err)}`, err);
      }
    } finally {
      release();
    }
    if (OUTAGE_STATUSES.has(res.status)) {
      this.noteDown();
      throw unavailable(`the inference server answered ${res.status}: ${errorText(bytes)}`);
    }
    // A 500 (or any other status) is about this request: Triton and KServe answer 500 when the
    // model raises on this input, so retrying it would fail again and stall the queue.
    if (res.status >= 500) throw new CutoutError('processing_failed', `The inference server failed on this image (${res.status}): ${errorText(bytes)}`);
    if (res.status !== 200) throw new CutoutError('processing_failed', `The inference server refused the request (${res.status}): ${errorText(bytes)}`);
    let tensorOut;
    let parsed: InferenceResponse;
    try {
      const { json, binary } = splitBody(bytes, res.headers.get(HEADER_LENGTH));
      parsed = json as InferenceResponse;
      const found = parsed.outputs?.find((o) => o.name === output.name);
      if (!found) throw new Error(`no output "${output.name}" in the response`);
      // Binary parts follow in the order of `outputs`: read them all, keep ours.
      tensorOut = readTensors(parsed.outputs, binary).find((t) => t.name === output.name)!;
    } catch (err) {
      throw new CutoutError('processing_failed', `Unreadable answer from the inference server: ${(err as Error).message}`, { cause: err });
    }
    if (tensorOut.shape.length !== 4 || tensorOut.shape[1] !== 1 || tensorOut.shape[2] !== height || tensorOut.shape[3] !== width) {
      throw new CutoutError('processing_failed', `The inference server's output has shape [${tensorOut.shape.join(', ')}], expected [1, 1, ${height}, ${width}]`);
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

  get usesBinary(): boolean {
    return this.binary;
  }
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
 * The quality settings' other sides run on `NAME-SIDE` models when the upstream has them;
 * otherwise those settings are refused with invalid_request.
 */
export async function connectConfiguredUpstream(config: { upstream: string; upstreamModel: string | null; model: string; workers: number; precision: Precision }): Promise<UpstreamInference> {
  const { resolveModel } = await import('../pipeline/manifest.js');
  const { modelSide } = await import('../pipeline/variants.js');
  const { QUALITIES, assertPrecisionServed } = await import('../options.js');
  // A default precision the upstream cannot give is a bad setting: refused before any connection.
  try {
    assertPrecisionServed(config.precision, true);
  } catch {
    throw new CutoutError('invalid_request', `precision int8 (CUTOUT_PRECISION or the config's precision) is not available with --upstream: the inference server runs the weights it was given; use auto or fp32`);
  }
  const manifest = resolveModel(config.model);
  const otherSides = [...new Set(QUALITIES.map((q) => modelSide(manifest, q)))].filter((s) => s !== manifest.input.width);
  return connectUpstream(manifest, { url: config.upstream, model: config.upstreamModel ?? manifest.name, maxInFlight: config.workers, otherSides });
}
