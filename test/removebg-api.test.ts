/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model;
 * what follows of `cutout serve` and the real model is what `npm run test:s3-results` runs.
 *
 * remove.bg's dialect over raw HTTP on a real `cutout serve`: the three body encodings and their
 * value forms, the formats (png, jpg, zip, auto), content negotiation, the headers on both kinds
 * of answer, /v1.0/account from the ledger, and every error code of remove.bg that cutout can
 * meet, each charging nothing. One server; quality fast.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../src/store/db.js';
import { createKey, startApi } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';
import { readZip } from './helpers/zip-read.js';

const cat = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const cup = await fs.readFile(path.join(FIXTURES, 'coffee.jpg')); // 600x400

const srv = await startApi(t, ['--allow-private-network', '--rate-limit', '40'], { env: { CUTOUT_QUALITY: 'fast' } });
const key = await createKey(srv.dataDir);
const endpoint = `${srv.url}/v1.0/removebg`;

const photos = http.createServer((req, res) => {
  if (req.url === '/cat.jpg') return void res.writeHead(200, { 'Content-Type': 'image/jpeg' }).end(cat);
  res.writeHead(404).end();
});
await new Promise<void>((resolve) => photos.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise((resolve) => photos.close(resolve)));
const photoUrl = (name: string) => `http://127.0.0.1:${(photos.address() as AddressInfo).port}/${name}`;

function multipart(image: Buffer | null, fields: Record<string, string> = {}, extra?: (f: FormData) => void): FormData {
  const f = new FormData();
  if (image) f.append('image_file', new Blob([image], { type: 'image/jpeg' }), 'photo.jpg');
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  extra?.(f);
  return f;
}

function post(body: FormData | string | URLSearchParams, headers: Record<string, string> = {}, apiKey = key.key): Promise<Response> {
  const type: Record<string, string> = typeof body === 'string' ? { 'Content-Type': 'application/json' } : {};
  return fetch(endpoint, { method: 'POST', headers: { 'X-Api-Key': apiKey, ...type, ...headers }, body });
}

async function total(apiKey = key.key): Promise<number> {
  return ((await (await fetch(`${srv.url}/v1.0/account`, { headers: { 'X-Api-Key': apiKey } })).json()) as any).data.attributes.credits.total;
}

async function removeBgError(res: Response): Promise<{ status: number; code: string; title: string; cors: string | null }> {
  const body = (await res.json()) as any;
  t.ok(Array.isArray(body.errors) && typeof body.errors[0].title === 'string', 'the {errors: [{title, code, detail}]} shape');
  return { status: res.status, code: body.errors[0].code, title: body.errors[0].title, cors: res.headers.get('access-control-allow-origin') };
}

t.test('/v1.0/account: the ledger in remove.bg\'s shape', async (t) => {
  const res = await fetch(`${srv.url}/v1.0/account`, { headers: { 'X-Api-Key': key.key } });
  t.equal(res.status, 200);
  t.equal(res.headers.get('access-control-allow-origin'), '*');
  t.same(await res.json(), { data: { attributes: { credits: { subscription: 0, payg: 10, enterprise: 0, total: 10 }, api: { free_calls: 0, sizes: 'all' } } } });
});

t.test('a browser\'s preflight: remove.bg\'s and rembg\'s paths answer it, v1 does not; answers expose their headers', async (t) => {
  const preflight = (url: string, method: string, headers = 'x-api-key,content-type') =>
    fetch(url, { method: 'OPTIONS', headers: { Origin: 'https://shop.example', 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers } });
  for (const [url, method, methods] of [[endpoint, 'POST', 'POST, OPTIONS'], [`${srv.url}/v1.0/account`, 'GET', 'GET, OPTIONS'], [`${srv.url}/api/remove`, 'POST', 'GET, POST, OPTIONS']]) {
    const res = await preflight(url, method);
    t.equal(res.status, 204, `OPTIONS ${new URL(url).pathname}`);
    t.equal(res.headers.get('access-control-allow-origin'), '*');
    t.equal(res.headers.get('access-control-allow-methods'), methods);
    t.equal(res.headers.get('access-control-allow-headers'), 'x-api-key,content-type', 'the headers the browser asked for');
    t.notOk(res.headers.get('access-control-allow-credentials'), 'never with credentials');
    t.ok(Number(res.headers.get('access-control-max-age')) > 0);
  }
  const odd = await preflight(endpoint, 'POST', 'x-api-key; evil: 1');
  t.equal(odd.headers.get('access-control-allow-headers'), 'X-Api-Key, Authorization, Content-Type, Accept', 'what is not a list of header names gets the default list');
  const v1 = await preflight(`${srv.url}/api/v1/remove`, 'POST');
  t.equal(v1.status, 404, 'v1 has no cross-origin rule (its playground is same-origin)');
  t.notOk(v1.headers.get('access-control-allow-origin'));

  const refused = await post(multipart(cat), {}, 'not-a-key');
  t.equal(refused.status, 403);
  t.equal(refused.headers.get('access-control-allow-origin'), '*', 'an error answer carries it too');
  t.match(refused.headers.get('access-control-expose-headers'), /X-Credits-Charged/);
  await refused.body?.cancel();
  const rembgRefused = await fetch(`${srv.url}/api/remove?url=x`, { headers: { 'X-Api-Key': 'not-a-key' } });
  t.equal(rembgRefused.headers.get('access-control-allow-origin'), '*', 'rembg\'s answers carry it, as rembg\'s server does');
  await rembgRefused.body?.cancel();
  const lost = await fetch(`${srv.url}/v1.0/nowhere`, { headers: { 'X-Api-Key': key.key } });
  t.equal(lost.status, 404);
  t.equal(lost.headers.get('access-control-allow-origin'), '*', 'a path no route matches too');
  await lost.body?.cancel();
});

t.test('multipart as the official CLI sends it (every field, most empty), format zip', async (t) => {
  const fields = { size: 'auto', type: 'auto', type_level: '', format: 'zip', roi: '', crop: '', crop_margin: '', scale: '', position: '', channels: 'rgba', add_shadow: '', semitransparency: '', bg_color: '' };
  const res = await post(multipart(cat, fields));
  t.equal(res.status, 200, res.status === 200 ? '' : await res.text());
  t.equal(res.headers.get('content-type'), 'application/zip');
  const entries = readZip(Buffer.from(await res.arrayBuffer()));
  t.same(entries.map((e) => e.name), ['color.jpg', 'alpha.png']);
  t.match(await sharp(entries[0].data).metadata(), { format: 'jpeg', channels: 3, width: 451, height: 300 });
  t.match(await sharp(entries[1].data).metadata(), { format: 'png', channels: 1, width: 451, height: 300 });
  t.equal(res.headers.get('x-credits-charged'), '0', 'auto on an image of at most 0.25 MP is a (free) preview, as remove.bg charges it');
});

t.test('urlencoded image_url (the Ruby gem), JSON with booleans; headers on both answers', async (t) => {
  const before = await total();
  const res = await post(new URLSearchParams({ image_url: photoUrl('cat.jpg'), size: 'full', format: 'png' }), { Accept: '*/*' });
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'image/png');
  const charged = Number(res.headers.get('x-credits-charged'));
  t.equal(charged, 1);
  t.equal(await total(), before - charged, 'X-Credits-Charged is what the account lost');
  for (const name of ['x-width', 'x-height', 'x-type', 'x-foreground-top', 'x-foreground-left', 'x-foreground-width', 'x-foreground-height', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
    t.ok(res.headers.get(name), `${name} on the image answer`);
  }
  t.same([res.headers.get('x-width'), res.headers.get('x-height'), res.headers.get('x-type')], ['451', '300', 'other']);
  t.equal(res.headers.get('access-control-allow-origin'), '*');

  const json = await post(JSON.stringify({ image_file_b64: cup.toString('base64'), crop: false, bg_color: 'green', type: 'product', format: 'jpg' }), { Accept: 'application/json' });
  t.equal(json.status, 200);
  t.match(json.headers.get('content-type'), /^application\/json/);
  const body = (await json.json()) as any;
  t.match(body.data, { result_b64: String, foreground_top: Number, foreground_left: Number, foreground_width: Number, foreground_height: Number });
  t.equal(json.headers.get('x-foreground-width'), String(body.data.foreground_width));
  t.match(await sharp(Buffer.from(body.data.result_b64, 'base64')).metadata(), { format: 'jpeg', width: 600, height: 400 });
  t.same([json.headers.get('x-type'), json.headers.get('x-credits-charged'), json.headers.get('x-width')], ['product', '0', '600'], 'preview (the default) is free');
  t.ok(json.headers.get('x-ratelimit-remaining'));
});

t.test('content negotiation: JSON only when asked and no */* or image/* is', async (t) => {
  const small = () => JSON.stringify({ image_file_b64: cat.toString('base64'), type_level: 'none' });
  for (const [accept, json] of [['application/json', true], ['application/json, text/plain, */*', false], ['image/*, application/json', false], ['', false]] as const) {
    const res = await post(small(), accept ? { Accept: accept } : {});
    t.equal(res.status, 200);
    t.equal(/json/.test(res.headers.get('content-type') ?? ''), json, `Accept: ${accept || '(none)'}`);
    t.equal(res.headers.get('x-type'), null, 'type_level=none: no X-Type');
    await res.arrayBuffer();
  }
});

t.test('sizes: preview is 0.25 MP by area; unknown sizes are invalid_size', async (t) => {
  const big = await sharp(cup).resize(1250, 800).jpeg().toBuffer();
  const res = await post(multipart(big, { size: 'regular', format: 'png' }));
  t.same([res.headers.get('x-width'), res.headers.get('x-height')], ['625', '400']);
  await res.arrayBuffer();
  const hd = await post(multipart(big, { size: 'hd', crop: 'true', crop_margin: '5%', scale: '80%', position: '50% 100%' }));
  t.equal(hd.status, 200, 'crop with a margin, scale and position together');
  t.equal(hd.headers.get('x-credits-charged'), '1');
  await hd.arrayBuffer();
  t.match(await removeBgError(await post(multipart(cat, { size: 'huge' }))), { status: 400, code: 'invalid_size', cors: '*' });
});

t.test("add_shadow=true draws cutout's float shadow under the subject (issue 54); false and absent draw none", async (t) => {
  /** Pixels of the cutout with some opacity: a shadow adds them below the subject. */
  const visible = async (fields: Record<string, string>) => {
    const res = await post(multipart(cup, { size: 'preview', format: 'png', ...fields }));
    t.equal(res.status, 200, JSON.stringify(fields));
    const { data, info } = await sharp(Buffer.from(await res.arrayBuffer())).ensureAlpha().extractChannel(3).raw().toBuffer({ resolveWithObject: true });
    let n = 0;
    for (let i = 0; i < data.length; i++) if (data[i] > 0) n++;
    return n / (info.width * info.height);
  };
  const none = await visible({});
  const off = await visible({ add_shadow: 'false' });
  const shadow = await visible({ add_shadow: 'true', shadow_method: 'latest' });
  t.equal(off, none, 'add_shadow=false draws nothing');
  t.ok(shadow > none, `add_shadow=true adds a shadow (${(none * 100).toFixed(1)} % of the pixels visible without, ${(shadow * 100).toFixed(1)} % with)`);
});

t.test('every 400 code cutout can meet, each charging nothing', async (t) => {
  const before = await total();
  const blank = await sharp({ create: { width: 200, height: 200, channels: 3, background: '#ffffff' } }).jpeg().toBuffer();
  const huge = await sharp({ create: { width: 8000, height: 7000, channels: 3, background: '#000000' } }).png({ compressionLevel: 9 }).toBuffer();
  const cases: [string, () => Promise<Response>][] = [
    ['missing_source', () => post(multipart(null, { size: 'preview' }))],
    ['multiple_sources', () => post(multipart(cat, { image_url: photoUrl('cat.jpg') }))],
    ['failed_image_download', () => post(JSON.stringify({ image_url: photoUrl('missing.jpg') }))],
    ['invalid_image_url', () => post(JSON.stringify({ image_url: 'ftp://example.com/x.jpg' }))],
    ['failed_to_read_image', () => post(multipart(cat.subarray(0, 3000)))],
    ['invalid_file_type', () => post(multipart(Buffer.from('just some text, not an image at all'.repeat(3))))],
    ['resolution_too_high', () => post(multipart(huge))],
    ['unknown_foreground', () => post(multipart(blank))],
    ['invalid_format', () => post(multipart(cat, { format: 'gif' }))],
    ['invalid_channels', () => post(multipart(cat, { channels: 'rgb' }))],
    ['invalid_bg_color', () => post(multipart(cat, { bg_color: 'blurple' }))],
    ['multiple_bg_sources', () => post(multipart(cat, { bg_color: 'fff', bg_image_url: photoUrl('cat.jpg') }))],
    ['invalid_bg_image_url', () => post(multipart(cat, { bg_image_url: 'not a url' }))],
    ['failed_bg_download', () => post(multipart(cat, { bg_image_url: photoUrl('missing.jpg') }))],
    ['invalid_crop_margin', () => post(multipart(cat, { crop: 'true', crop_margin: '600px' }))],
    ['invalid_roi', () => post(multipart(cat, { roi: '1 2 3' }))],
    ['roi_exceeds_bounds', () => post(multipart(cat, { roi: '0 0 452px 300px' }))],
    ['roi_region_empty', () => post(multipart(cat, { roi: '60% 0% 40% 100%' }))],
    ['invalid_scale', () => post(multipart(cat, { scale: '5%' }))],
    ['invalid_position', () => post(multipart(cat, { position: 'left' }))],
    ['invalid_semitransparency', () => post(JSON.stringify({ image_file_b64: cat.toString('base64'), semitransparency: 'maybe' }))],
  ];
  for (const [code, send] of cases) t.match(await removeBgError(await send()), { status: 400, code, cors: '*' }, code);
  t.equal(await total(), before, 'nothing was charged');
});

t.test('403, 402, 429 and 404 in remove.bg\'s shape', async (t) => {
  t.match(await removeBgError(await fetch(endpoint, { method: 'POST' })), { status: 403, code: 'auth_failed', title: 'Missing API Key', cors: '*' });
  t.match(await removeBgError(await post(multipart(cat), {}, 'cut_live_wrong')), { status: 403, code: 'auth_failed', title: 'API Key invalid' });
  t.match(await removeBgError(await fetch(`${srv.url}/v1.0/account`, { headers: { 'X-Api-Key': 'wrong' } })), { status: 403, code: 'auth_failed' });
  const broke = await createKey(srv.dataDir);
  const store = await openStore(srv.dataDir);
  for (let i = 0; i < 10; i++) await store.ledger.recordRun({ id: crypto.randomUUID(), accountId: broke.account, keyId: broke.id, channel: 'api', input: 'x', size: 'full', credits: 1, ms: 1 });
  await store.close();
  const poor = await post(multipart(cat, { size: 'full' }), {}, broke.key);
  t.match(await removeBgError(poor), { status: 402, code: 'insufficient_credits' });
  t.ok(poor.headers.get('x-ratelimit-limit'), 'rate-limit headers on errors too');
  // auto is "the highest available resolution (based on image size and available credits)".
  const astronaut = await fs.readFile(path.join(FIXTURES, 'astronaut.jpg')); // 512x512: over 0.25 MP
  const fallback = await post(multipart(astronaut, { size: 'auto' }), {}, broke.key);
  t.equal(fallback.status, 200, 'auto without a credit: a free preview, not a 402');
  t.equal(fallback.headers.get('x-credits-charged'), '0');
  const previewSide = Number(fallback.headers.get('x-width'));
  t.ok(previewSide * Number(fallback.headers.get('x-height')) <= 250_000 && previewSide < 512, `a preview's area (${previewSide} px wide)`);
  await fallback.arrayBuffer();
  t.match(await removeBgError(await fetch(`${srv.url}/v1.0/improve`, { method: 'POST', headers: { 'X-Api-Key': key.key } })), { status: 404, code: 'not_found' });
  const busy = await createKey(srv.dataDir);
  let limited: Response | null = null;
  for (let i = 0; i < 45 && !limited; i++) {
    const res = await fetch(`${srv.url}/v1.0/account`, { headers: { 'X-Api-Key': busy.key } });
    if (res.status === 429) limited = res;
    else await res.arrayBuffer();
  }
  t.ok(limited, 'the 41st request in a minute is refused');
  t.ok(Number(limited!.headers.get('retry-after')) > 0);
  t.match(await removeBgError(limited!), { status: 429, code: 'rate_limit_exceeded', title: 'Rate limit exceeded' });
});

t.test("rembg's API: GET ?url and POST file, its parameters and error shapes", async (t) => {
  // A key of its own: the file's other tests used most of the main key's 40 requests a minute.
  const own = await createKey(srv.dataDir);
  const auth = { Authorization: `Bearer ${own.key}` };
  const before = await total(own.key);
  const byUrl = await fetch(`${srv.url}/api/remove?url=${encodeURIComponent(photoUrl('cat.jpg'))}&bgc=0,0,255,255`, { headers: auth });
  t.equal(byUrl.status, 200);
  t.equal(byUrl.headers.get('content-type'), 'image/png');
  const flat = await sharp(Buffer.from(await byUrl.arrayBuffer())).metadata();
  t.match(flat, { width: 451, height: 300, channels: 3 }, 'an opaque bgc flattens the cutout');
  t.equal(await total(own.key), before - 1, 'a full-size result, 1 credit');
  const form = new FormData();
  form.append('file', new Blob([cat]), 'cat.jpg');
  form.append('om', 'true');
  form.append('ppm', 'true');
  const mask = await fetch(`${srv.url}/api/remove`, { method: 'POST', headers: { 'X-Api-Key': own.key }, body: form });
  t.equal(mask.status, 200);
  const px = await sharp(Buffer.from(await mask.arrayBuffer())).extractChannel(0).raw().toBuffer();
  t.ok(px.every((v) => v === 0 || v === 255), 'om + ppm: a hard greyscale mask');
  const badModel = await fetch(`${srv.url}/api/remove?url=${encodeURIComponent(photoUrl('cat.jpg'))}&model=u3net`, { headers: auth });
  t.equal(badModel.status, 422);
  t.match(await badModel.json(), { detail: [{ loc: ['query', 'model'], msg: String, type: String }] });
  const badThreshold = await fetch(`${srv.url}/api/remove?url=x&af=300`, { headers: auth });
  t.match([badThreshold.status, await badThreshold.json()], [422, { detail: [{ loc: ['query', 'af'] }] }]);
  const noFile = await fetch(`${srv.url}/api/remove`, { method: 'POST', headers: auth, body: new FormData() });
  t.match([noFile.status, await noFile.json()], [422, { detail: [{ loc: ['body', 'file'], type: 'missing' }] }]);
  const noKey = await fetch(`${srv.url}/api/remove?url=x`);
  t.match([noKey.status, await noKey.json()], [401, { detail: String }]);
  const missing = await fetch(`${srv.url}/api/remove?url=${encodeURIComponent(photoUrl('missing.jpg'))}`, { headers: auth });
  t.match([missing.status, await missing.json()], [400, { detail: /url answered HTTP 404/ }]);
});
