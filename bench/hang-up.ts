/**
 * `npm run bench:hang-up -- [--rounds 5] [--hang-up-ms 400] [--clients 4]`
 *
 * Issue 46's measure of the door policy's hang-up: one real `cutout serve` child process with
 * `--workers 1` and the real model; `--clients` clients send full-size removals of a 3.4 MP photo
 * and hang up after `--hang-up-ms`; then a small removal (451x300) is sent and timed from its
 * request to the last byte of its answer. Through each door in turn (v1's /api/v1/remove,
 * remove.bg's /v1.0/removebg, rembg's /api/remove, Photoroom's /v1/segment, Clipdrop's
 * /remove-background/v1), with the same small removal on the idle
 * server beside it for reference; the doors are interleaved round by round and the server is
 * idle (no slot busy, by /metrics) before each measure. Prints each round, the medians, the load
 * average before and after, and one JSON line. A server that finished the abandoned removals
 * first would answer the small one seconds late (issue 46 measured 4140 ms through v1 and
 * 3959 ms through rembg's door before the door policy; 882 ms through remove.bg's).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../dist/store/db.js';
import { machine } from './common.js';
import { ROOT, sleep, startServer, type Server } from './fleet-parts.js';
import { option } from './common.js';

const args = process.argv.slice(2);
const rounds = Number(option(args, '--rounds', '5'));
const hangUpMs = Number(option(args, '--hang-up-ms', '400'));
const clients = Number(option(args, '--clients', '4'));

const fixture = path.join(ROOT, 'test', 'fixtures', 'chelsea.jpg');
/** About 3.4 MP: under v1's 4 MP sync cap, and long enough in the model to hang up during it (as test/e2e/hang-up.test.ts). */
const big = await sharp(fixture).resize({ width: 2260 }).jpeg().toBuffer();
const small = fs.readFileSync(fixture); // 451x300

interface Door { name: string; path: string; field: string; fields: Record<string, string>; headers(key: string): Record<string, string> }

const DOORS: Door[] = [
  { name: 'remove.bg', path: '/v1.0/removebg', field: 'image_file', fields: { size: 'full' }, headers: (k) => ({ 'X-Api-Key': k }) },
  { name: 'v1', path: '/api/v1/remove', field: 'image_file', fields: { size: 'full' }, headers: (k) => ({ Authorization: `Bearer ${k}` }) },
  { name: 'rembg', path: '/api/remove', field: 'file', fields: {}, headers: (k) => ({ 'X-Api-Key': k }) },
  { name: 'photoroom', path: '/v1/segment', field: 'image_file', fields: {}, headers: (k) => ({ 'x-api-key': k }) },
  { name: 'clipdrop', path: '/remove-background/v1', field: 'image_file', fields: {}, headers: (k) => ({ 'x-api-key': k }) },
];

function form(door: Door, image: Buffer): FormData {
  const f = new FormData();
  f.append(door.field, new Blob([image], { type: 'image/jpeg' }), 'photo.jpg');
  for (const [k, v] of Object.entries(door.fields)) f.append(k, v);
  return f;
}

/** Busy inference slots, from the server's /metrics. */
async function busySlots(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('cutout_inference_slots{') && l.includes('state="busy"'));
  return line ? Number(line.split(' ').pop()) : -1;
}

async function idle(url: string): Promise<void> {
  const until = Date.now() + 120_000;
  while ((await busySlots(url)) !== 0) {
    if (Date.now() > until) throw new Error('the server did not become idle in 2 minutes');
    await sleep(25);
  }
}

/** The small removal through `door`, timed to the last byte of a 200. */
async function timedSmall(url: string, door: Door, key: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${url}${door.path}`, { method: 'POST', headers: door.headers(key), body: form(door, small) });
  await res.arrayBuffer();
  const ms = performance.now() - started;
  if (res.status !== 200) throw new Error(`${door.name}: the small removal answered ${res.status}`);
  return Math.round(ms);
}

/**
 * `clients` full-size removals through `door`, each abandoned after `hangUpMs`; then the small
 * one, timed. `busy`: the slots busy just before the hang-up (1: a removal was running, so the
 * measure is of a hang-up mid-removal).
 */
async function afterHangUps(url: string, door: Door, key: string): Promise<{ ms: number; busy: number }> {
  const abandoned = Array.from({ length: clients }, () => {
    const client = new AbortController();
    const sent = fetch(`${url}${door.path}`, { method: 'POST', headers: door.headers(key), body: form(door, big), signal: client.signal })
      .then((res) => res.arrayBuffer()).catch(() => undefined);
    return { client, sent };
  });
  await sleep(hangUpMs);
  const busy = await busySlots(url);
  for (const a of abandoned) a.client.abort();
  await Promise.all(abandoned.map((a) => a.sent));
  return { ms: await timedSmall(url, door, key), busy };
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : Math.round((s[s.length / 2 - 1] + s[s.length / 2]) / 2);
}

async function newKey(dataDir: string): Promise<string> {
  const store = await openStore(dataDir);
  try {
    const k = await store.keys.create({ name: 'bench-hang-up' });
    await store.ledger.addCredits(k.id, 10_000);
    return k.key;
  } finally {
    await store.close();
  }
}

async function measure(server: Server, key: string): Promise<Record<string, { idle: number[]; afterHangUps: number[]; busyAtHangUp: number[] }>> {
  const out = Object.fromEntries(DOORS.map((d) => [d.name, { idle: [] as number[], afterHangUps: [] as number[], busyAtHangUp: [] as number[] }]));
  // Warm-up, not measured: the model loaded, one big and one small removal through each door.
  for (const door of DOORS) {
    await (await fetch(`${server.url}${door.path}`, { method: 'POST', headers: door.headers(key), body: form(door, big) })).arrayBuffer();
    await timedSmall(server.url, door, key);
  }
  for (let r = 0; r < rounds; r++) {
    // Each round starts at another door, so no door always follows the same one.
    for (const door of [...DOORS.slice(r % DOORS.length), ...DOORS.slice(0, r % DOORS.length)]) {
      await idle(server.url);
      const quiet = await timedSmall(server.url, door, key);
      await idle(server.url);
      const loaded = await afterHangUps(server.url, door, key);
      out[door.name].idle.push(quiet);
      out[door.name].afterHangUps.push(loaded.ms);
      out[door.name].busyAtHangUp.push(loaded.busy);
      console.log(`round ${r + 1}  ${door.name.padEnd(9)}  idle ${String(quiet).padStart(5)} ms   after ${clients} hang-ups ${String(loaded.ms).padStart(5)} ms   (slots busy at the hang-up: ${loaded.busy})`);
    }
  }
  return out;
}

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-hang-up-'));
const loadBefore = os.loadavg();
console.log(`cutout bench:hang-up on ${machine()}`);
console.log(`one server, --workers 1; ${clients} clients hang up after ${hangUpMs} ms, then a 451x300 removal; ${rounds} rounds; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);
const dataDir = path.join(workDir, 'data');
const server = await startServer(['--data', dataDir, '--workers', '1', '--rate-limit', '1000000'], workDir, 0);
try {
  const key = await newKey(dataDir);
  const figures = await measure(server, key);
  const loadAfter = os.loadavg();
  for (const [door, f] of Object.entries(figures)) {
    console.log(`median ${door.padEnd(9)}  idle ${median(f.idle)} ms   after hang-ups ${median(f.afterHangUps)} ms`);
  }
  console.log(`load average after: ${loadAfter.map((l) => l.toFixed(2)).join(' ')}`);
  console.log(JSON.stringify({ machine: machine(), clients, hangUpMs, rounds, loadBefore, loadAfter, figures }));
} finally {
  await server.stop();
  fs.rmSync(workDir, { recursive: true, force: true });
}
