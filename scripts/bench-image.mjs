#!/usr/bin/env node
// `npm run bench:image`: the container image's figures (issue 43), on this machine, from one run:
// - its size, uncompressed (docker image inspect);
// - `docker run` to a 200 from /readyz (the model preloaded), three times;
// - a removal in the container against the same removal by `cutout serve` on the host: the same
//   photo, size=full, alternated request by request; the ratio of the medians (host / container:
//   1.0 means as fast);
// - the server's RSS over a soak of a few hundred preview removals, with glibc's allocator and with
//   Debian's jemalloc (LD_PRELOAD, MALLOC_ARENA_MAX=2 as imgproxy sets it; the image's default).
// The image is $CUTOUT_IMAGE_TAG (default cutout:test, which npm run test:image builds). Containers
// use the host's network and are reached on 127.0.0.1 only. Writes bench-out/image.json.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOCKER = process.env.CUTOUT_DOCKER ?? (fs.existsSync('/usr/bin/docker') ? '/usr/bin/docker' : 'docker');
const TAG = process.env.CUTOUT_IMAGE_TAG ?? 'cutout:test';
const PHOTO = fs.readFileSync(path.join(ROOT, 'test', 'fixtures', 'chelsea.jpg'));
const SOAK = Number(process.env.CUTOUT_SOAK_REQUESTS ?? 300);
const SPEED_ROUNDS = Number(process.env.CUTOUT_SPEED_ROUNDS ?? 6);
const JEMALLOC = '/usr/local/lib/libjemalloc.so.2'; // the Dockerfile's link

function docker(args) {
  const r = spawnSync(DOCKER, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`docker ${args.join(' ')}: ${r.stderr || r.stdout}`);
  return r.stdout.trim();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function untilReady(base, timeoutMs = 120_000) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const res = await fetch(`${base}/readyz`).catch(() => null);
    if (res?.status === 200) return;
    await sleep(50);
  }
  throw new Error(`${base} not ready within ${timeoutMs} ms`);
}

/** A container serving on a free port; returns its base URL and name. */
async function runContainer(env = {}) {
  const port = await freePort();
  const name = `cutout-bench-${process.pid}-${port}`;
  const envArgs = Object.entries({ CUTOUT_PORT: String(port), CUTOUT_RATE_LIMIT: '1000000', CUTOUT_LOG_LEVEL: 'warn', ...env }).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
  const started = Date.now();
  docker(['run', '-d', '--name', name, '--network', 'host', '--read-only', '--tmpfs', '/tmp', ...envArgs, TAG]);
  const base = `http://127.0.0.1:${port}`;
  await untilReady(base);
  return { name, base, readyMs: Date.now() - started };
}

const stopContainer = (name) => spawnSync(DOCKER, ['rm', '-f', '-v', name]);

/** The node process in the container (tini's child), as the host sees it. */
function serverPid(name) {
  const tini = docker(['inspect', '-f', '{{.State.Pid}}', name]);
  return Number(spawnSync('pgrep', ['-P', tini], { encoding: 'utf8' }).stdout.trim().split('\n')[0]);
}

const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

async function remove(base, key, size) {
  const form = new FormData();
  form.append('image_file', new Blob([PHOTO]), 'photo.jpg');
  form.append('size', size);
  const started = performance.now();
  const res = await fetch(`${base}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`remove answered ${res.status}`);
  return performance.now() - started;
}

/** A host `cutout serve` on a fresh data directory, with a key that has credits enough. */
async function hostServer() {
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-host-'));
  const port = await freePort();
  const env = { ...process.env, CUTOUT_HOME: data, CUTOUT_PORT: String(port), CUTOUT_RATE_LIMIT: '1000000', CUTOUT_LOG_LEVEL: 'warn' };
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'cutout'), 'serve', '--preload', '--no-exit-with-parent'], { env, stdio: 'ignore' });
  const base = `http://127.0.0.1:${port}`;
  await untilReady(base);
  const created = JSON.parse(spawnSync(process.execPath, [path.join(ROOT, 'bin', 'cutout'), 'keys', 'create', '--json'], { env, encoding: 'utf8' }).stdout);
  spawnSync(process.execPath, [path.join(ROOT, 'bin', 'cutout'), 'credits', 'add', created.account, '100'], { env });
  return { base, key: created.key, stop: () => { child.kill('SIGTERM'); fs.rmSync(data, { recursive: true, force: true }); } };
}

function containerKey(name) {
  const created = JSON.parse(docker(['exec', name, 'cutout', 'keys', 'create', '--json']));
  docker(['exec', name, 'cutout', 'credits', 'add', String(created.account), '100']);
  return created.key;
}

async function soak(env) {
  const c = await runContainer(env);
  try {
    const key = containerKey(c.name);
    const pid = serverPid(c.name);
    for (let i = 0; i < 5; i++) await remove(c.base, key, 'preview'); // warm-up
    const samples = [rssMb(pid)];
    for (let i = 1; i <= SOAK; i++) {
      await remove(c.base, key, 'preview');
      if (i % 25 === 0) samples.push(rssMb(pid));
    }
    return { after_warmup_mb: Math.round(samples[0]), peak_mb: Math.round(Math.max(...samples)), end_mb: Math.round(samples.at(-1)), samples_mb: samples.map(Math.round) };
  } finally {
    stopContainer(c.name);
  }
}

async function main() {
  const [info] = JSON.parse(docker(['image', 'inspect', TAG]));
  const out = { image: TAG, size_mb: Math.round(info.Size / 1e6), cpu: os.cpus()[0]?.model, cores: os.availableParallelism() };
  process.stdout.write(`image ${TAG}: ${out.size_mb} MB uncompressed\n`);

  const ready = [];
  for (let i = 0; i < 3; i++) {
    const c = await runContainer();
    ready.push(c.readyMs);
    stopContainer(c.name);
  }
  out.run_to_ready_ms = ready;
  process.stdout.write(`docker run to /readyz 200: ${ready.map((ms) => (ms / 1000).toFixed(1)).join(', ')} s\n`);

  // Speed: alternated, each server warmed by one removal first.
  const host = await hostServer();
  const c = await runContainer();
  try {
    const key = containerKey(c.name);
    await remove(host.base, host.key, 'full');
    await remove(c.base, key, 'full');
    const hostMs = [];
    const containerMs = [];
    for (let i = 0; i < SPEED_ROUNDS; i++) {
      hostMs.push(await remove(host.base, host.key, 'full'));
      containerMs.push(await remove(c.base, key, 'full'));
    }
    out.removal_full_ms = { host_median: Math.round(median(hostMs)), container_median: Math.round(median(containerMs)), host: hostMs.map(Math.round), container: containerMs.map(Math.round) };
    out.speed_ratio = Number((median(hostMs) / median(containerMs)).toFixed(3));
    process.stdout.write(`removal (size=full): host ${out.removal_full_ms.host_median} ms, container ${out.removal_full_ms.container_median} ms (medians of ${SPEED_ROUNDS}); ratio host/container ${out.speed_ratio}\n`);
  } finally {
    stopContainer(c.name);
    host.stop();
  }

  out.soak_requests = SOAK;
  // The image preloads jemalloc: an empty LD_PRELOAD gives glibc's allocator back.
  out.rss_glibc = await soak({ LD_PRELOAD: '', MALLOC_ARENA_MAX: '' });
  process.stdout.write(`RSS over ${SOAK} preview removals, glibc malloc: ${JSON.stringify(out.rss_glibc)}\n`);
  out.rss_jemalloc = await soak({ LD_PRELOAD: JEMALLOC, MALLOC_ARENA_MAX: '2' }); // the image's default
  process.stdout.write(`RSS over ${SOAK} preview removals, jemalloc: ${JSON.stringify(out.rss_jemalloc)}\n`);

  fs.mkdirSync(path.join(ROOT, 'bench-out'), { recursive: true });
  fs.writeFileSync(path.join(ROOT, 'bench-out', 'image.json'), JSON.stringify(out, null, 2) + '\n');
  process.stdout.write('written: bench-out/image.json\n');
}

main().catch((err) => {
  process.stderr.write(`bench:image: ${err.stack ?? err}\n`);
  process.exitCode = 1;
});
