/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model;
 * what follows of `cutout serve` and the real model is what `npm run test:s3-results` runs.
 *
 * POST /api/v1/remove with the real model: charging, headers, JSON metadata, stored results,
 * test keys, idempotency, the 4 MP rule, image_url, the sync timeout, retention and a failure
 * inside the server. Every cutout here is made by the real model in the server process.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import crypto from 'node:crypto';
import sharp from 'sharp';
import { openStore } from '../src/store/db.js';
import { balanceOf, bearer, createKey, errorCode, startApi, upload } from './helpers/api-server.js';
import { alphaAt, FIXTURES } from './helpers/cli.js';
import { until } from './helpers/process.js';

const coffee = await fs.readFile(path.join(FIXTURES, 'coffee.jpg')); // 600x400
const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300

t.test('sync removal: bytes, JSON, charges, stored results, test keys, idempotency', async (t) => {
  const srv = await startApi(t, ['--workers', '1'], { modelMs: 1000 });
  const live = await createKey(srv.dataDir);
  const remove = (body: FormData | string, headers: Record<string, string> = {}, key = live.key) =>
    fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key, headers), body });

  t.test('full size costs one credit and answers with the image', async (t) => {
    const started = Date.now();
    const inFlight = remove(upload(coffee, { size: 'full' }));
    // Inference runs off the event loop: health answers at once meanwhile (once the stand-in's
    // call is under way; with `cutout serve`'s real model, 300 ms into it).
    await until('the model call to begin', async () => srv.model === null || srv.model.calls > 0, 20_000);
    if (srv.model === null) await new Promise((r) => setTimeout(r, 300));
    const h0 = Date.now();
    const health = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
    t.ok(Date.now() - h0 < 1500, `health answered in ${Date.now() - h0} ms during inference`);
    t.equal(health.queue.processing, 1, 'the removal holds a pool slot');
    const res = await inFlight;
    t.equal(res.status, 200, `took ${Date.now() - started} ms`);
    t.equal(res.headers.get('content-type'), 'image/png');
    t.equal(res.headers.get('x-credits-charged'), '1');
    t.equal(res.headers.get('x-credits-remaining'), '9');
    t.match(res.headers.get('x-job-id'), /^[0-9a-f-]{36}$/);
    t.ok(res.headers.get('x-ratelimit-limit'));
    const png = Buffer.from(await res.arrayBuffer());
    const meta = await sharp(png).metadata();
    t.same([meta.format, meta.width, meta.height, meta.hasAlpha], ['png', 600, 400, true]);
    const [corner, centre] = await alphaAt(png, [[0, 0], [300, 200]]);
    t.ok(corner < centre, `the cutout has a transparent background (corner ${corner}, centre ${centre})`);

    const download = await fetch(`${srv.url}/api/v1/results/${res.headers.get('x-job-id')}`);
    t.equal(download.status, 200, 'downloadable without auth');
    t.equal(download.headers.get('content-type'), 'image/png');
    t.same(Buffer.from(await download.arrayBuffer()), png, 'the stored bytes are the bytes answered');
    t.equal(await balanceOf(srv.url, live.key), 9);
  });

  t.test('Accept: application/json gives the 2.2 metadata; format and colour apply', async (t) => {
    const res = await remove(JSON.stringify({ image_file_b64: chelsea.toString('base64'), format: 'jpg', bg_color: '#00ff00', size: 'preview' }), {
      'Content-Type': 'application/json',
      Accept: 'application/json',
    });
    t.equal(res.status, 200);
    const body = (await res.json()) as any;
    t.same(Object.keys(body).sort(), ['credits_charged', 'credits_remaining', 'height', 'id', 'processing_ms', 'url', 'width']);
    t.match(body, { width: 451, height: 300, credits_charged: 0, credits_remaining: 9, processing_ms: Number });
    t.equal(body.url, `${srv.url}/api/v1/results/${body.id}`);
    t.equal(res.headers.get('x-job-id'), body.id);
    const download = await fetch(body.url);
    t.equal(download.headers.get('content-type'), 'image/jpeg');
    const { data } = await sharp(Buffer.from(await download.arrayBuffer())).raw().toBuffer({ resolveWithObject: true });
    t.ok(data[1] > 200 && data[0] < 60 && data[2] < 60, `the background corner is flattened to green (${data[0]},${data[1]},${data[2]})`);
  });

  t.test('a test key is never charged and gets preview size whatever it asks', async (t) => {
    const test = await createKey(srv.dataDir, ['--test', '--account', live.account]);
    const big = await sharp(coffee).resize(1200, 800).jpeg().toBuffer();
    const res = await remove(upload(big, { size: 'full' }), { Accept: 'application/json' }, test.key);
    t.equal(res.status, 200);
    const body = (await res.json()) as any;
    t.match(body, { width: 800, height: 533, credits_charged: 0, credits_remaining: 9 });
    t.equal(res.headers.get('x-credits-charged'), '0');
    const account = (await (await fetch(`${srv.url}/api/v1/account`, { headers: bearer(test.key) })).json()) as any;
    t.match(account, { account_id: live.account, test: true, balance: 9 });
  });

  t.test('Idempotency-Key: concurrent and repeated requests charge once', async (t) => {
    const headers = { 'Idempotency-Key': 'order-42', Accept: 'application/json' };
    const [a, b] = await Promise.all([remove(upload(chelsea, { size: 'full' }), headers), remove(upload(chelsea, { size: 'full' }), headers)]);
    t.same([a.status, b.status], [200, 200]);
    const [ja, jb] = (await Promise.all([a.json(), b.json()])) as any[];
    t.equal(ja.id, jb.id, 'both answers are the one removal');
    t.equal(ja.credits_charged, 1);
    t.equal(await balanceOf(srv.url, live.key), 8, 'charged once');
    const replay = await remove(upload(chelsea, { size: 'full' }), { 'Idempotency-Key': 'order-42' });
    t.equal(replay.status, 200);
    t.equal(replay.headers.get('x-job-id'), ja.id);
    t.equal(replay.headers.get('idempotent-replayed'), 'true');
    t.equal(replay.headers.get('content-type'), 'image/png', 'the replay honours this request\'s Accept');
    t.equal(await balanceOf(srv.url, live.key), 8, 'no second charge');
    const other = await errorCode(await remove(upload(coffee, { size: 'full' }), { 'Idempotency-Key': 'order-42' }));
    t.same([other.status, other.code], [422, 'invalid_request'], 'same key, different image');
    t.match(other.message, /different parameters/);
  });

  t.test('4 MP cap at size=full; previews of the same image are fine; previews free at balance 0', async (t) => {
    const large = await sharp({ create: { width: 2100, height: 2000, channels: 3, background: '#808080' } }).composite([
      { input: await sharp(coffee).resize(1200, 800).toBuffer(), left: 450, top: 600 },
    ]).jpeg().toBuffer();
    const refused = await errorCode(await remove(upload(large, { size: 'full' })));
    t.same([refused.status, refused.code], [400, 'invalid_request']);
    t.match(refused.message, /4 MP/);
    t.equal(await balanceOf(srv.url, live.key), 8, 'a refused request is not charged');

    const store = await openStore(srv.dataDir);
    for (let i = 0; i < 8; i++) await store.ledger.recordRun({ id: crypto.randomUUID(), accountId: live.account, keyId: live.id, channel: 'api', input: 'x', size: 'full', credits: 1, ms: 1 });
    await store.close();
    const preview = await remove(upload(large), { Accept: 'application/json' });
    t.equal(preview.status, 200, 'a preview works at balance 0');
    t.match(await preview.json(), { width: 800, height: 762, credits_charged: 0, credits_remaining: 0 });
    const full = await errorCode(await remove(upload(chelsea, { size: 'full' })));
    t.same([full.status, full.code], [402, 'insufficient_credits']);
  });

  t.test('usage counts the requests of today', async (t) => {
    const usage = (await (await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(live.key) })).json()) as any;
    t.equal(usage.days.length, 30);
    t.equal(usage.days[0].date, new Date().toISOString().slice(0, 10));
    // Over HTTP: 2 charged full + 3 free previews (JSON, test key, 4 MP image); plus the 8 charges
    // written straight to the store to empty the balance.
    t.same(usage.days[0], { date: usage.days[0].date, credits: 2 + 8, requests: 5 + 8 });
  });

  // Last in this server: its request would count in the usage above.
  t.test('the CLI\'s image options reach HTTP too: mask and alpha (options table)', async (t) => {
    const res = await remove(upload(chelsea, { size: 'preview', mask: 'true', alpha: 'hard', refine: 'false', decontaminate: 'false' }));
    t.equal(res.status, 200);
    t.equal(res.headers.get('x-credits-charged'), '0');
    const { data, info } = await sharp(Buffer.from(await res.arrayBuffer())).raw().toBuffer({ resolveWithObject: true });
    const levels = new Set<number>();
    for (let i = 0; i < data.length; i += info.channels) levels.add(data[i]);
    t.same([...levels].sort((x, y) => x - y), [0, 255], 'a hard greyscale matte: black and white only');
    const bad = await errorCode(await remove(upload(chelsea, { size: 'preview', alpha: 'medium' })));
    t.same([bad.status, bad.code], [400, 'invalid_request']);
    t.match(bad.message, /Expected one of soft, hard for alpha but received "medium"/);
  });
});

t.test('image_url is fetched (private network allowed for the test server)', async (t) => {
  const images = http.createServer((req, res) => {
    if (req.url === '/cat.jpg') res.writeHead(200, { 'Content-Type': 'image/jpeg' }).end(chelsea);
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => images.listen(0, '127.0.0.1', r));
  t.teardown(() => images.close());
  const port = (images.address() as any).port;
  const srv = await startApi(t, ['--allow-private-network']);
  const { key } = await createKey(srv.dataDir);
  const post = (url: string) => fetch(`${srv.url}/api/v1/remove`, {
    method: 'POST', headers: bearer(key, { 'Content-Type': 'application/json', Accept: 'application/json' }), body: JSON.stringify({ image_url: url }),
  });
  const ok = await post(`http://127.0.0.1:${port}/cat.jpg`);
  t.equal(ok.status, 200);
  t.match(await ok.json(), { width: 451, height: 300, credits_charged: 0 });
  const missing = await errorCode(await post(`http://127.0.0.1:${port}/nope.jpg`));
  t.same([missing.status, missing.code], [400, 'invalid_request']);
});

t.test('the sync timeout answers 504 processing_failed and never charges', async (t) => {
  const srv = await startApi(t, ['--sync-timeout', '300'], { modelMs: 1500 });
  const { key } = await createKey(srv.dataDir);
  const started = Date.now();
  const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(coffee, { size: 'full' }) });
  const e = await errorCode(res);
  t.same([e.status, e.code], [504, 'processing_failed']);
  t.ok(Date.now() - started < 2000, `answered after ${Date.now() - started} ms`);
  // Let the model finish in the background: its late result must not be charged or stored.
  for (let i = 0; i < 100 && ((await (await fetch(`${srv.url}/api/v1/health`)).json()) as any).queue.processing > 0; i++) {
    await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(await balanceOf(srv.url, key), 10);
  const results = await fs.readdir(path.join(srv.dataDir, 'results')).catch(() => []);
  t.same(results, [], 'no result file');
});

