/**
 * The confidence of a cutout (issue 45): the signals on synthetic mattes (a crisp subject is
 * surer than a blurred one, whatever its size), and every door that carries it (with the other
 * result fields of result-fields.ts; the table itself: test/result-fields.test.ts) on one real server with the real model: the v1 sync answer (header and JSON, and
 * its idempotent replay), a job's record and its callback body, remove.bg's and rembg's answers
 * (and their CORS exposure), the library's result, and the CLI's --json lines, manifest lines
 * and --review-below. The same photo gives the same confidence through every door: it is read
 * off the model's grid, whatever the output size.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { confidenceOf, matteSignals } from '../../src/pipeline/confidence.js';
import { RESULT_FIELDS } from '../../src/result-fields.js';
import { createRemover } from '../../src/index.js';
import { bearer, createKey, startServe, upload } from '../helpers/api-server.js';
import { startReceiver } from '../helpers/callback-receiver.js';
import { FIXTURES, runCli } from '../helpers/cli.js';

/** A disc of radius r on a w x w grid, its edge softened over `soft` pixels. */
function disc(w: number, r: number, soft: number): Float32Array {
  const p = new Float32Array(w * w);
  for (let y = 0; y < w; y++) {
    for (let x = 0; x < w; x++) {
      const d = Math.hypot(x - w / 2, y - w / 2);
      p[y * w + x] = Math.min(1, Math.max(0, 0.5 - (d - r) / Math.max(soft, 1e-6)));
    }
  }
  return p;
}

/** An interleaved RGB grid: `inside` where the matte is above 0.5, `outside` elsewhere. */
function paint(p: Float32Array, inside: [number, number, number], outside: [number, number, number]): Uint8Array {
  const rgb = new Uint8Array(p.length * 3);
  for (let i = 0; i < p.length; i++) rgb.set(p[i] > 0.5 ? inside : outside, i * 3);
  return rgb;
}

t.test('signals: a crisp subject is surer than the same subject blurred, and a faint one least sure', async (t) => {
  const w = 256;
  const crisp = disc(w, 60, 1);
  const blurred = disc(w, 60, 24);
  const faint = crisp.map((v) => v * 0.55);
  const range = [0, 1] as const;
  const c = [crisp, blurred, faint].map((p) => confidenceOf(matteSignals(p, p, paint(p, [200, 30, 30], [30, 30, 200]), range, w, w)));
  t.ok(c.every((v) => v >= 0 && v <= 1), `each in [0, 1]: ${c.join(', ')}`);
  t.ok(c[0] > c[1], `crisp ${c[0]} > blurred ${c[1]}`);
  t.ok(c[1] > c[2], `blurred ${c[1]} > faint ${c[2]}`);
  const s = matteSignals(crisp, crisp, paint(crisp, [200, 30, 30], [30, 30, 200]), range, w, w);
  t.ok(Math.abs(s.area - (Math.PI * 60 * 60) / (w * w)) < 0.01, `area is the disc's share (${s.area})`);
  t.equal(s.parts, 1);
  t.equal(s.frameTouch, 0);
  const two = crisp.map((v, i) => Math.max(v, (i % w) < 20 && Math.floor(i / w) < 20 ? 1 : 0));
  const split = matteSignals(two, two, paint(two, [200, 30, 30], [30, 30, 200]), range, w, w);
  t.equal(split.parts, 2, 'a second part is counted');
  t.ok(split.frameTouch > 0, 'and a part at the corner touches the frame');
});

t.test('signals: a subject in its background\'s colours is less sure than the same matte in its own', async (t) => {
  const w = 256;
  const range = [0, 1] as const;
  const p = disc(w, 60, 2);
  const apart = matteSignals(p, p, paint(p, [220, 40, 40], [40, 60, 210]), range, w, w);
  const alike = matteSignals(p, p, paint(p, [120, 110, 100], [120, 110, 100]), range, w, w);
  t.equal(apart.colourOverlap, 0, 'no colour in common');
  t.ok(Math.abs(alike.colourOverlap - 1) < 1e-9, `the same colours: ${alike.colourOverlap}`);
  t.equal(apart.softness, alike.softness, 'the matte is the same');
  t.ok(confidenceOf(alike) < confidenceOf(apart), `${confidenceOf(alike)} < ${confidenceOf(apart)}`);
  // Half the subject in the background's colour: a coefficient between the two.
  const half = paint(p, [220, 40, 40], [40, 60, 210]);
  for (let i = 0; i < p.length; i++) if (p[i] > 0.95 && (i % w) < w / 2) half.set([40, 60, 210], i * 3);
  const mixed = matteSignals(p, p, half, range, w, w).colourOverlap;
  t.ok(mixed > 0.5 && mixed < 0.8, `half the subject in the background's colour: ${mixed}`);
  const empty = new Float32Array(w * w);
  t.equal(matteSignals(empty, empty, paint(empty, [0, 0, 0], [9, 9, 9]), range, w, w).colourOverlap, 0, 'no sure subject: no evidence, 0');
});

t.test('every door carries the same confidence for the same photo', async (t) => {
  const cat = fs.readFileSync(path.join(FIXTURES, 'chelsea.jpg'));
  const srv = await startServe(t, ['--workers', '1', '--allow-private-network', '--rate-limit', '100000']);
  const key = await createKey(srv.dataDir);
  const receiver = await startReceiver(t);

  const sync = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key, { 'Idempotency-Key': 'conf-1' }), body: upload(cat, { size: 'full' }) });
  t.equal(sync.status, 200);
  await sync.arrayBuffer();
  const header = sync.headers.get('x-cutout-confidence');
  t.match(header, /^(0\.\d{3}|1\.000)$/, `v1 sync: X-Cutout-Confidence ${header}`);
  const confidence = Number(header);
  const replay = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key, { 'Idempotency-Key': 'conf-1' }), body: upload(cat, { size: 'full' }) });
  await replay.arrayBuffer();
  t.equal(replay.headers.get('x-cutout-confidence'), header, 'an idempotent replay answers the same confidence');
  const asJson = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key, { Accept: 'application/json' }), body: upload(cat) });
  const body = (await asJson.json()) as any;
  t.equal(asJson.headers.get('x-cutout-confidence'), header, 'v1 sync with Accept: application/json, at preview size: the same header');
  t.notOk('confidence' in body, 'and the JSON metadata stays api-spec 2.2\'s');

  const job = await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key.key, { 'X-Callback-Url': `${receiver.url}/conf` }), body: upload(cat, { size: 'full' }) });
  const id = ((await job.json()) as any).job_id as string;
  const [callback] = await receiver.waitFor((r) => r.path === '/conf', 1, 120_000);
  t.equal(callback.json.confidence.toFixed(3), header, 'the callback body carries it');
  const record = (await (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key.key) })).json()) as any;
  t.match(record, { status: 'done' });
  t.equal(record.confidence.toFixed(3), header, 'and the job record');

  const removebg = await fetch(`${srv.url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': key.key, Origin: 'https://shop.example' }, body: (() => { const f = new FormData(); f.append('image_file', new Blob([cat]), 'cat.jpg'); f.append('size', 'preview'); return f; })() });
  t.equal(removebg.status, 200);
  await removebg.arrayBuffer();
  t.equal(removebg.headers.get('x-cutout-confidence'), header, 'remove.bg\'s answer');
  t.match(removebg.headers.get('access-control-expose-headers'), /X-Cutout-Confidence/, 'and a page on another origin may read it');
  const rembg = await fetch(`${srv.url}/api/remove`, { method: 'POST', headers: { 'X-Api-Key': key.key }, body: (() => { const f = new FormData(); f.append('file', new Blob([cat]), 'cat.jpg'); return f; })() });
  t.equal(rembg.status, 200);
  await rembg.arrayBuffer();
  t.equal(rembg.headers.get('x-cutout-confidence'), header, 'rembg\'s answer');

  const remover = await createRemover({ dataDir: srv.dataDir });
  try {
    const result = await remover.remove(cat);
    t.equal(result.confidence.toFixed(3), header, 'the library\'s result');
    for (const row of RESULT_FIELDS) t.type(result[row.key], 'number', `and its ${row.key}`);
    t.same([result.width, result.height], [451, 300], 'its size: the photo\'s, at full size');
    t.ok(result.foregroundLeft + result.foregroundWidth <= result.width && result.foregroundTop + result.foregroundHeight <= result.height, 'the subject\'s box lies in it');
  } finally {
    await remover.close();
  }

  // The CLI: --json lines, the manifest's lines, --review-below.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-confidence-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.copyFileSync(path.join(FIXTURES, 'chelsea.jpg'), path.join(dir, 'cat.jpg'));
  fs.copyFileSync(path.join(FIXTURES, 'coffee.jpg'), path.join(dir, 'cup.jpg'));
  const env = { CUTOUT_HOME: path.join(dir, 'home') };
  const all = await runCli(['cat.jpg', 'cup.jpg', '--json', '--manifest', 'run.jsonl', '--review-below', '1', '--no-progress'], { cwd: dir, env });
  t.equal(all.code, 0, all.stderr);
  const lines = all.stdout.toString().trim().split('\n').map((l) => JSON.parse(l));
  const items = lines.filter((l) => !l.summary);
  t.equal(items.find((l) => l.input === 'cat.jpg').confidence, confidence, 'the CLI\'s --json line: the same confidence');
  const flagged = items.filter((l) => l.confidence < 1);
  t.ok(flagged.length >= 1, 'cutouts below 1');
  t.same(items.filter((l) => l.review).map((l) => l.input), flagged.map((l) => l.input), '"review": true on those below the threshold');
  for (const l of flagged) t.match(all.stderr, new RegExp(`review: ${l.input} \\(confidence ${l.confidence.toFixed(2)}\\)`), `a review line for ${l.input}`);
  t.match(lines.at(-1), { summary: { review: flagged.length } }, 'the count in the JSON summary');
  t.match(all.stderr, new RegExp(`${flagged.length} to review \\(confidence below 1\\)`), 'and in the summary line');
  const manifest = fs.readFileSync(path.join(dir, 'run.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  t.same(manifest.map((l) => [l.input, l.confidence]).sort(), items.map((l) => [l.input, l.confidence]).sort(), 'each manifest line carries it');
  // Every result field, in every --json line and manifest line, under the table's keys.
  for (const l of items) {
    const line = manifest.find((m) => m.input === l.input);
    for (const row of RESULT_FIELDS) {
      t.type(l[row.json], 'number', `${l.input}: --json line's ${row.json}`);
      if (row.manifest) t.equal(line[row.manifest], l[row.json], `${l.input}: the manifest line's ${row.manifest} is the same`);
    }
    t.ok(l.processing_ms <= l.ms, `${l.input}: the removal's time (${l.processing_ms} ms) is within the input's (${l.ms} ms)`);
  }
  const none = await runCli(['cat.jpg', '--json', '--review-below', '0', '--overwrite', '--no-progress'], { cwd: dir, env });
  t.equal(none.code, 0, none.stderr);
  t.notMatch(none.stderr, /review:/, 'nothing is below 0');
  const bad = await runCli(['cat.jpg', '--review-below', '80%'], { cwd: dir, env });
  t.equal(bad.code, 2, 'a threshold that is not 0..1 is a usage error');
  t.match(bad.stderr, /--review-below takes a confidence from 0 to 1/);
});
