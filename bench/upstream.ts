/**
 * `npm run bench -- --upstream URL [dir] [--runs N]`: the pipeline with its model call on an Open
 * Inference Protocol server, per image: the local stages (decode, preprocess, postprocess,
 * encode), the upstream round trip, the model server's own inference time (the
 * `cutout_inference_ms` response parameter of `cutout model-server`; Triton does not report one),
 * and the protocol's overhead = round trip - server time, binary tensors against JSON,
 * interleaved per run. Medians per image; then one JSON line.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createPipeline, resolveModel } from '../dist/pipeline/index.js';
import { IMAGE_EXTENSIONS } from '../dist/commands/inputs.js';
import { connectUpstream, type UpstreamInference } from '../dist/oip/client.js';
import { ROOT, median, option } from './common.js';


interface Sample { roundTrip: number; server: number | null; local: number; total: number }

export async function benchUpstream(args: string[]): Promise<void> {
  const url = option(args, '--upstream', '');
  const runs = Number(option(args, '--runs', '3'));
  const modelName = option(args, '--model', 'isnet-medium');
  const dir = args.find((a, i) => !a.startsWith('--') && !['--upstream', '--runs', '--model'].includes(args[i - 1] ?? '')) ?? path.join(ROOT, 'test', 'fixtures');
  const files = fs.readdirSync(dir).filter((f) => IMAGE_EXTENSIONS.includes(path.extname(f).toLowerCase()) && !f.includes('.cutout.')).sort();
  const manifest = resolveModel(modelName);
  const clients: Record<'binary' | 'json', UpstreamInference> = {
    binary: await connectUpstream(manifest, { url, model: manifest.name, maxInFlight: 1, otherSides: [] }),
    json: await connectUpstream(manifest, { url, model: manifest.name, maxInFlight: 1, otherSides: [], forceJson: true }),
  };
  const pipelines = { binary: createPipeline({ model: modelName, upstream: clients.binary }), json: createPipeline({ model: modelName, upstream: clients.json }) };
  if (!clients.binary.usesBinary) process.stdout.write(`note: ${url} does not list binary_tensor_data; both columns are JSON\n`);
  const request = { size: 'full' as const, format: 'png' as const, bgColor: null, crop: false, quality: 'best' as const };

  const run = async (mode: 'binary' | 'json', bytes: Buffer): Promise<Sample> => {
    const r = await pipelines[mode].removeBackground(bytes, request);
    const t = r.timings;
    return { roundTrip: t.inference, server: clients[mode].lastServerMs, local: t.decode + t.preprocess + t.postprocess + t.encode, total: r.ms };
  };

  // One untimed pass per mode: connections open, the server's session warm.
  const first = fs.readFileSync(path.join(dir, files[0]));
  await run('binary', first);
  await run('json', first);

  const rows = [];
  process.stdout.write(`upstream ${clients.binary.shownUrl}, ${runs} runs per image and mode (interleaved), medians in ms\n`);
  process.stdout.write('image              mode    local  round-trip  server  overhead  overhead/server\n');
  for (const f of files) {
    const bytes = fs.readFileSync(path.join(dir, f));
    const samples: Record<'binary' | 'json', Sample[]> = { binary: [], json: [] };
    for (let i = 0; i < runs; i++) {
      // Alternating order: both modes see the same machine load.
      for (const mode of (i % 2 ? ['json', 'binary'] : ['binary', 'json']) as ('binary' | 'json')[]) samples[mode].push(await run(mode, bytes));
    }
    for (const mode of ['binary', 'json'] as const) {
      const s = samples[mode];
      const server = s.every((x) => x.server !== null) ? median(s.map((x) => x.server!)) : null;
      const overheads = server === null ? [] : s.map((x) => x.roundTrip - x.server!);
      const overhead = server === null ? null : median(overheads);
      const row = { image: f, mode, local: median(s.map((x) => x.local)), roundTrip: median(s.map((x) => x.roundTrip)), server, overhead, overheadRatio: overhead === null || !server ? null : overhead / server };
      rows.push(row);
      const n = (x: number | null, w: number) => (x === null ? 'n/a' : x.toFixed(0)).padStart(w);
      process.stdout.write(`${f.padEnd(18)} ${mode.padEnd(6)} ${n(row.local, 6)} ${n(row.roundTrip, 11)} ${n(server, 7)} ${n(overhead, 9)} ${(row.overheadRatio === null ? 'n/a' : `${(row.overheadRatio * 100).toFixed(1)} %`).padStart(16)}\n`);
    }
  }
  process.stdout.write(JSON.stringify({ bench: 'upstream', upstream: clients.binary.shownUrl, runs, rows }) + '\n');
}
