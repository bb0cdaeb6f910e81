/**
 * `npm run bench:traces`: what tracing costs a removal (issue 56's bar: "at most a few per cent").
 * Two `cutout serve` child processes side by side, each with its own data directory, model and one
 * worker: one without tracing, one exporting every span (the sampler's default, always on) in
 * http/protobuf to an OTLP receiver in this process (which only counts what it gets). The same
 * sync removal (POST /api/v1/remove, size=full, a 1000x1000 photo) is sent to each in turn, after
 * warm-ups; per removal, the client's wall time (median) and the server process's CPU time (its
 * utime + stime from /proc over all the runs, divided by their number: the span export in the
 * background counted). Then the ratios traced / untraced and one JSON line.
 *
 * Flags: --runs N (15), --quality Q (best), --photo FILE (test/fixtures/coffee.jpg).
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { openStore } from '../dist/store/db.js';
import { arg, BIN, FIXTURES, machine, median } from './common.js';

const runs = Number(arg('runs', '15'));
const quality = arg('quality', 'best');
const photo = await sharp(fs.readFileSync(arg('photo', path.join(FIXTURES, 'coffee.jpg')))).resize(1000, 1000, { fit: 'cover' }).jpeg({ quality: 92 }).toBuffer();

/** An OTLP/HTTP receiver that takes every export and counts its requests and bytes. */
async function startSink(): Promise<{ url: string; requests: number; bytes: number; close(): void }> {
  const sink = { url: '', requests: 0, bytes: 0, close: () => server.close() };
  const server = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => (sink.bytes += c.length));
    req.on('end', () => {
      sink.requests++;
      res.writeHead(200, { 'Content-Type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  sink.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return sink;
}

interface Server { name: string; url: string; key: string; child: ChildProcess; dataDir: string }

/** `cutout serve` on a free port with a fresh data directory and a key with credits; resolves once it listens. */
async function startServe(name: string, env: NodeJS.ProcessEnv): Promise<Server> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `cutout-bench-traces-${name}-`));
  const store = await openStore(dataDir, { url: null });
  const created = await store.keys.create({ name: 'bench', test: false, accountId: null });
  await store.ledger.addCredits(created.account, 10_000);
  await store.close();
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data', dataDir, '--workers', '1', '--preload', '--log-level', 'silent', '--no-exit-with-parent'], { env });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`cutout serve (${name}) exited with ${code}: ${err}`)));
  });
  return { name, url, key: created.key, child, dataDir };
}

/** The process's CPU time so far, in ms (Linux: utime + stime of /proc/PID/stat, in clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function removal(srv: Server): Promise<number> {
  const form = new FormData();
  form.append('image_file', new Blob([photo]), 'photo.jpg');
  form.append('size', 'full');
  form.append('quality', quality);
  const started = performance.now();
  const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${srv.key}` }, body: form });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${srv.name}: POST /api/v1/remove answered ${res.status}`);
  return performance.now() - started;
}

const sink = await startSink();
const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
const servers = {
  off: await startServe('off', base),
  on: await startServe('on', { ...base, OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }),
};
const times: Record<'off' | 'on', number[]> = { off: [], on: [] };
const cpu: Record<'off' | 'on', number> = { off: 0, on: 0 };
try {
  for (let i = 0; i < 2; i++) for (const srv of Object.values(servers)) await removal(srv); // warm-up
  for (let i = 0; i < runs; i++) {
    // Alternating which goes first, so neither always follows the other's work.
    const order = i % 2 ? (['on', 'off'] as const) : (['off', 'on'] as const);
    for (const name of order) {
      const srv = servers[name];
      const before = cpuMs(srv.child.pid!);
      times[name].push(await removal(srv));
      cpu[name] += cpuMs(srv.child.pid!) - before;
    }
  }
  // The last batch of spans leaves within the processor's 5 s delay: counted too.
  const before = cpuMs(servers.on.child.pid!);
  await new Promise((r) => setTimeout(r, 6000));
  cpu.on += cpuMs(servers.on.child.pid!) - before;
} finally {
  for (const srv of Object.values(servers)) {
    srv.child.kill('SIGTERM');
    await new Promise((r) => srv.child.once('exit', r));
    fs.rmSync(srv.dataDir, { recursive: true, force: true });
  }
  sink.close();
}

const wall = { off: median(times.off), on: median(times.on) };
const cpuPer = { off: cpu.off / runs, on: cpu.on / runs };
const row = (name: 'off' | 'on') => `tracing ${name.padEnd(3)}: median ${wall[name].toFixed(0)} ms (min ${Math.min(...times[name]).toFixed(0)}, max ${Math.max(...times[name]).toFixed(0)}); server CPU ${cpuPer[name].toFixed(0)} ms per removal`;
process.stdout.write(`a 1000x1000 removal (size=full, quality ${quality}) through cutout serve, ${runs} runs each, alternated; ${machine()}\n`);
process.stdout.write(`${row('off')}\n${row('on')}\n`);
process.stdout.write(`ratio traced / untraced: wall ${(wall.on / wall.off).toFixed(3)}, CPU ${(cpuPer.on / cpuPer.off).toFixed(3)}; the receiver got ${sink.requests} exports, ${(sink.bytes / 1024).toFixed(1)} kB\n`);
process.stdout.write(JSON.stringify({
  bench: 'traces', quality, runs, off_ms: wall.off, on_ms: wall.on, wall_ratio: Number((wall.on / wall.off).toFixed(3)),
  off_cpu_ms: cpuPer.off, on_cpu_ms: cpuPer.on, cpu_ratio: Number((cpuPer.on / cpuPer.off).toFixed(3)), exports: sink.requests, cpu: machine(),
}) + '\n');
