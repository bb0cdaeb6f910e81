/**
 * A deliberately minimal Open Inference Protocol v2 server, written from the KServe v2 REST
 * document alone: JSON tensors only (no binary tensor data extension, like MLServer), the health,
 * metadata and inference endpoints, `{"error": ...}` on failure. It shares no code with
 * src/oip: it runs the real model with onnxruntime-node itself, on the verified fp32 file.
 *
 * It records what clients sent, so tests can check that the client asked for one output and
 * sent JSON. Its metadata can be made wrong on purpose (`inputShape`, `inputDatatype`).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as ort from 'onnxruntime-node';
import { resolveModel } from '../../src/toolchain/manifest.js';
import { ensureRunnableModel } from '../../src/toolchain/weights.js';

export interface MinimalOipOptions {
  modelName?: string;
  /** Declared input shape (default [1, 3, 1024, 1024]). */
  inputShape?: number[];
  inputDatatype?: string;
}

export interface SeenInference {
  contentType: string | undefined;
  headerLength: string | undefined;
  acceptEncoding: string | undefined;
  inputs: { name: string; shape: number[]; datatype: string; hasParameters: boolean }[];
  outputs: unknown;
}

export interface MinimalOip {
  url: string;
  /**
   * Set by a test: answer inferences with this status (and an error body), after this delay;
   * `times`: only that many inferences fail, the ones after run the model.
   */
  failure: { status?: number; delayMs?: number; times?: number; oversizeBytes?: number };
  seen: SeenInference[];
  /** Every request: its Authorization header and the client's port (one port per connection). */
  requests: { path: string; authorization: string | undefined; clientPort: number | undefined }[];
  close(): Promise<void>;
}

export async function startMinimalOip(t: Tap.Test, opts: MinimalOipOptions = {}): Promise<MinimalOip> {
  const modelName = opts.modelName ?? 'isnet-medium';
  const session = await ort.InferenceSession.create(await ensureRunnableModel(resolveModel('isnet-medium')), { intraOpNumThreads: 2 });
  const inputMeta = { name: 'input', datatype: opts.inputDatatype ?? 'FP32', shape: opts.inputShape ?? [1, 3, 1024, 1024] };
  // As Triton or KServe list them: every output of the graph (we declare two of ISNet's twelve).
  const outputsMeta = [
    { name: 'output', datatype: 'FP32', shape: [1, 1, 1024, 1024] },
    { name: '1890', datatype: 'FP32', shape: [1, 1, 1024, 1024] },
  ];
  const seen: SeenInference[] = [];
  const requests: MinimalOip['requests'] = [];
  const failure: MinimalOip['failure'] = {};

  const reply = (res: http.ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  };

  const server = http.createServer(async (req, res) => {
    try {
      const url = req.url ?? '/';
      requests.push({ path: url, authorization: req.headers.authorization, clientPort: req.socket.remotePort });
      if (req.method === 'GET' && url === '/v2') return reply(res, 200, { name: 'minimal', version: '0', extensions: [] });
      if (req.method === 'GET' && (url === '/v2/health/ready' || url === '/v2/health/live')) return reply(res, 200, {});
      const m = /^\/v2\/models\/([^/]+)(\/ready|\/infer)?$/.exec(url);
      if (!m || m[1] !== modelName) return reply(res, 404, { error: `no model at ${url}` });
      if (req.method === 'GET' && !m[2]) return reply(res, 200, { name: modelName, versions: ['1'], platform: 'onnxruntime_onnx', inputs: [inputMeta], outputs: outputsMeta });
      if (req.method === 'GET' && m[2] === '/ready') return reply(res, 200, {});
      if (req.method !== 'POST' || m[2] !== '/infer') return reply(res, 404, { error: 'not found' });
      if (failure.delayMs) await new Promise((r) => setTimeout(r, failure.delayMs));
      if (failure.status && (failure.times === undefined || failure.times > 0)) {
        if (failure.times !== undefined) failure.times--;
        req.resume();
        return reply(res, failure.status, { error: `failing on purpose with ${failure.status}` });
      }
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      seen.push({
        contentType: req.headers['content-type'],
        headerLength: req.headers['inference-header-content-length'] as string | undefined,
        acceptEncoding: req.headers['accept-encoding'],
        inputs: body.inputs.map((i: any) => ({ name: i.name, shape: i.shape, datatype: i.datatype, hasParameters: i.parameters !== undefined })),
        outputs: body.outputs,
      });
      if (failure.oversizeBytes) {
        // A 200 whose body never ends as a matte would: padding streamed without a Content-Length.
        res.writeHead(200, { 'Content-Type': 'application/json' });
        const chunk = Buffer.alloc(1 << 20, 0x20);
        for (let sent = 0; sent < failure.oversizeBytes && !res.destroyed; sent += chunk.length) {
          if (!res.write(chunk)) await new Promise((r) => res.once('drain', r).once('close', r));
        }
        return res.end();
      }
      const input = body.inputs[0];
      if (input.name !== 'input' || input.datatype !== 'FP32' || !Array.isArray(input.data)) return reply(res, 400, { error: 'expected FP32 JSON input "input"' });
      const tensor = new ort.Tensor('float32', Float32Array.from(input.data.flat(Infinity)), input.shape);
      const wanted: string[] = body.outputs ? body.outputs.map((o: any) => o.name) : outputsMeta.map((o) => o.name);
      const result = await session.run({ input: tensor }, wanted);
      reply(res, 200, {
        model_name: modelName,
        model_version: '1',
        outputs: wanted.map((name) => ({ name, datatype: 'FP32', shape: [...result[name].dims], data: Array.from(result[name].data as Float32Array) })),
      });
    } catch (err) {
      reply(res, 500, { error: (err as Error).message });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const close = () => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  t.teardown(async () => {
    await close();
    await session.release();
  });
  return { url: `http://127.0.0.1:${port}`, seen, requests, failure, close };
}
