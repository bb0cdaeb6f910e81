/**
 * `npm run bench -- --dialects [dir] [--runs N] [--quality Q]`: what each dialect costs over the
 * native API on the same server and the same photos. A real `cutout serve` (a child process, its
 * own data directory) answers, per photo and run, interleaved in a rotating order: v1's
 * `POST /api/v1/remove` (the native route), remove.bg's `/v1.0/removebg`, rembg's `/api/remove`,
 * Photoroom's `/v1/segment` and Clipdrop's `/remove-background/v1`, each a full-size PNG cutout
 * asked as that API's clients ask it, timed from the request to the last byte. Medians per photo
 * in ms, each dialect's ratio to native, then one JSON line. Photos above 4 MP are left out (the
 * native sync route's limit).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IMAGE_EXTENSIONS } from '../dist/commands/inputs.js';
import { BIN, ROOT, median, option, runCutout } from './common.js';

const NATIVE_MAX_PIXELS = 4_000_000;

/** One route: its path, and the request its clients send for a full-size PNG cutout. */
interface Route { name: string; path: string; headers(key: string): Record<string, string>; form(bytes: Buffer, quality: string): FormData }

function formWith(field: string, bytes: Buffer, fields: Record<string, string>): FormData {
  const form = new FormData();
  form.append(field, new Blob([bytes]), 'photo.jpg');
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  return form;
}

const ROUTES: readonly Route[] = [
  // The native route names its quality; the dialects get the same one from CUTOUT_QUALITY.
  { name: 'native', path: '/api/v1/remove', headers: (k) => ({ Authorization: `Bearer ${k}` }), form: (b, q) => formWith('image_file', b, { size: 'full', format: 'png', quality: q }) },
  { name: 'removebg', path: '/v1.0/removebg', headers: (k) => ({ 'X-Api-Key': k }), form: (b) => formWith('image_file', b, { size: 'full', format: 'png' }) },
  { name: 'rembg', path: '/api/remove', headers: (k) => ({ 'X-Api-Key': k }), form: (b) => formWith('file', b, {}) },
  { name: 'photoroom', path: '/v1/segment', headers: (k) => ({ 'x-api-key': k }), form: (b) => formWith('image_file', b, {}) },
  { name: 'clipdrop', path: '/remove-background/v1', headers: (k) => ({ 'x-api-key': k, Accept: 'image/png' }), form: (b) => formWith('image_file', b, {}) },
];

/** Starts `cutout serve` on a free port; resolves with its URL. */
function listening(server: ReturnType<typeof spawn>): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = '';
    server.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^listening on (http:\/\/\S+)$/m.exec(out);
      if (m) resolve(m[1]);
    });
    server.once('exit', (code) => reject(new Error(`cutout serve exited with ${code}`)));
  });
}

async function photosOf(dir: string): Promise<string[]> {
  const sharp = (await import('sharp')).default;
  const files = fs.readdirSync(dir).filter((f) => IMAGE_EXTENSIONS.includes(path.extname(f).toLowerCase()) && !f.includes('.cutout.')).sort();
  const kept: string[] = [];
  for (const f of files) {
    const m = await sharp(path.join(dir, f)).metadata().catch(() => null);
    if (m?.width && m.height && m.width * m.height <= NATIVE_MAX_PIXELS) kept.push(f);
  }
  return kept;
}

export async function benchDialects(args: string[]): Promise<void> {
  const runs = Number(option(args, '--runs', '5'));
  const quality = option(args, '--quality', 'fast');
  const dir = args.find((a, i) => !a.startsWith('--') && !['--runs', '--quality'].includes(args[i - 1] ?? '')) ?? path.join(ROOT, 'test', 'fixtures');
  const files = await photosOf(dir);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-dialects-'));
  const env = { ...process.env, CUTOUT_QUALITY: quality, CUTOUT_MARKETPLACE_SECRET: '', CUTOUT_LOG_LEVEL: 'silent' };
  const server = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data', dataDir, '--rate-limit', '100000'], { env });
  try {
    const url = await listening(server);
    const { key, id } = JSON.parse(await runCutout(['keys', 'create', '--json', '--data', dataDir], env)) as { key: string; id: string };
    await runCutout(['credits', 'add', id, String((files.length * runs + 2) * ROUTES.length + 10), '--data', dataDir], env);
    const timed = async (route: Route, bytes: Buffer): Promise<number> => {
      const started = performance.now();
      const res = await fetch(`${url}${route.path}`, { method: 'POST', headers: route.headers(key), body: route.form(bytes, quality) });
      await res.arrayBuffer();
      const ms = performance.now() - started;
      if (res.status !== 200) throw new Error(`${route.name}: HTTP ${res.status}`);
      return ms;
    };
    // One untimed pass per route: the model session and every code path warm.
    for (const route of ROUTES) await timed(route, fs.readFileSync(path.join(dir, files[0])));
    await report(files, runs, quality, (f) => fs.readFileSync(path.join(dir, f)), timed);
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function report(files: string[], runs: number, quality: string, read: (f: string) => Buffer, timed: (r: Route, b: Buffer) => Promise<number>): Promise<void> {
  const out = (s: string) => process.stdout.write(s);
  out(`each dialect against native /api/v1/remove, ${runs} runs per photo (rotating order), quality ${quality}, medians in ms\n`);
  out(`${'photo'.padEnd(24)}${ROUTES.map((r) => r.name.padStart(11)).join('')}\n`);
  const rows: Record<string, string | number>[] = [];
  for (const f of files) {
    const bytes = read(f);
    const samples: Record<string, number[]> = Object.fromEntries(ROUTES.map((r) => [r.name, []]));
    for (let i = 0; i < runs; i++) {
      // Rotating which goes first keeps any warm-up or drift from favouring one route.
      for (let j = 0; j < ROUTES.length; j++) {
        const route = ROUTES[(i + j) % ROUTES.length];
        samples[route.name].push(await timed(route, bytes));
      }
    }
    const row: Record<string, string | number> = { photo: f };
    for (const r of ROUTES) row[r.name] = Math.round(median(samples[r.name]));
    rows.push(row);
    out(`${f.padEnd(24)}${ROUTES.map((r) => String(row[r.name]).padStart(11)).join('')}\n`);
  }
  const medians = Object.fromEntries(ROUTES.map((r) => [r.name, median(rows.map((row) => row[r.name] as number))]));
  // The ratio of each photo's medians, then their median: a photo's size does not weigh on it.
  const ratios = Object.fromEntries(ROUTES.filter((r) => r.name !== 'native').map((r) => [r.name, Number(median(rows.map((row) => (row[r.name] as number) / (row.native as number))).toFixed(3))]));
  out(`ratio to native (median over photos): ${Object.entries(ratios).map(([k, v]) => `${k} ${v}`).join(', ')}\n`);
  out(JSON.stringify({ bench: 'dialects', quality, runs, photos: rows.length, median_ms: medians, ratio_to_native: ratios, rows }) + '\n');
}
