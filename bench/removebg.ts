/**
 * `npm run bench -- --removebg [dir] [--runs N] [--quality Q]`: what remove.bg's dialect costs
 * over the native API on the same server and the same photos. A real `cutout serve` (a child
 * process, its own data directory) answers, per photo and run, interleaved: `POST /api/v1/remove`
 * (multipart, size=full, format=png) and `POST /v1.0/removebg` (multipart, size=full, format=png),
 * each timed from the request to the last byte of the image. Medians per photo in ms, the
 * difference, then one JSON line. Photos above 4 MP are left out (the native sync route's limit).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IMAGE_EXTENSIONS } from '../dist/commands/inputs.js';
import { BIN, ROOT, median, option, runCutout } from './common.js';


export async function benchRemoveBg(args: string[]): Promise<void> {
  const runs = Number(option(args, '--runs', '5'));
  const quality = option(args, '--quality', 'fast');
  const dir = args.find((a, i) => !a.startsWith('--') && !['--runs', '--quality'].includes(args[i - 1] ?? '')) ?? path.join(ROOT, 'test', 'fixtures');
  const files = fs.readdirSync(dir).filter((f) => IMAGE_EXTENSIONS.includes(path.extname(f).toLowerCase()) && !f.includes('.cutout.')).sort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-bench-removebg-'));
  const env = { ...process.env, CUTOUT_QUALITY: quality, CUTOUT_MARKETPLACE_SECRET: '' };
  const server = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data', dataDir, '--rate-limit', '100000'], { env });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      server.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /^listening on (http:\/\/\S+)$/m.exec(out);
        if (m) resolve(m[1]);
      });
      server.once('exit', (code) => reject(new Error(`cutout serve exited with ${code}`)));
    });
    const { key, id } = JSON.parse(await runCutout(['keys', 'create', '--json', '--data', dataDir], env)) as { key: string; id: string };
    await runCutout(['credits', 'add', id, String(files.length * runs * 2 + 10), '--data', dataDir], env);

    const timed = async (route: 'native' | 'dialect', bytes: Buffer): Promise<number> => {
      const form = new FormData();
      form.append('image_file', new Blob([bytes]), 'photo.jpg');
      form.append('size', 'full');
      form.append('format', 'png');
      if (route === 'native') form.append('quality', quality);
      const started = performance.now();
      const res = route === 'native'
        ? await fetch(`${url}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form })
        : await fetch(`${url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': key }, body: form });
      await res.arrayBuffer();
      const ms = performance.now() - started;
      if (res.status !== 200) throw new Error(`${route}: HTTP ${res.status}`);
      return ms;
    };

    // One untimed pass per route: the model session and both code paths warm.
    const first = fs.readFileSync(path.join(dir, files[0]));
    await timed('native', first);
    await timed('dialect', first);

    process.stdout.write(`remove.bg dialect against native /remove, ${runs} runs per photo (interleaved), quality ${quality}, medians in ms\n`);
    process.stdout.write('photo                     native  dialect  difference\n');
    const rows: { photo: string; native: number; dialect: number }[] = [];
    for (const f of files) {
      const bytes = fs.readFileSync(path.join(dir, f));
      const samples = { native: [] as number[], dialect: [] as number[] };
      for (let i = 0; i < runs; i++) {
        // Alternating which goes first keeps any warm-up or drift from favouring one side.
        const order: ('native' | 'dialect')[] = i % 2 === 0 ? ['native', 'dialect'] : ['dialect', 'native'];
        for (const route of order) samples[route].push(await timed(route, bytes));
      }
      const row = { photo: f, native: Math.round(median(samples.native)), dialect: Math.round(median(samples.dialect)) };
      rows.push(row);
      process.stdout.write(`${f.padEnd(24)} ${String(row.native).padStart(7)} ${String(row.dialect).padStart(8)} ${String(row.dialect - row.native).padStart(11)}\n`);
    }
    const native = median(rows.map((r) => r.native));
    const dialect = median(rows.map((r) => r.dialect));
    process.stdout.write(JSON.stringify({ bench: 'removebg', quality, runs, photos: rows.length, native_ms: native, dialect_ms: dialect, rows }) + '\n');
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
