/**
 * Photoroom's dialect over raw HTTP on a real `cutout serve`, in the shape of Photoroom's curl and
 * JavaScript samples (multipart `image_file`, `x-api-key`): every parameter of POST /v1/segment,
 * the JSON answer, `x-uncertainty-score`, /v1/account and /v2/account from the ledger (credits
 * before and after), every error and its `{detail, status_code, type}` shape (each charging
 * nothing), the preflight, and paths that must not shadow v1's or remove.bg's. One server; quality fast.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../../src/store/db.js';
import { createKey, startServe } from '../helpers/api-server.js';
import { FIXTURES } from '../helpers/cli.js';

const cat = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const cup = await fs.readFile(path.join(FIXTURES, 'coffee.jpg')); // 600x400
/** Past a preview's 0.25 MP, so that a preview is seen to shrink it. */
const bigCup = await sharp(cup).resize(1200, 800).jpeg().toBuffer();

const srv = await startServe(t, ['--rate-limit', '200'], { env: { CUTOUT_QUALITY: 'fast' } });
const key = await createKey(srv.dataDir);
{
  // Enough credits for every case below (a new key has 10).
  const store = await openStore(srv.dataDir);
  await store.ledger.addCredits(key.account, 90);
  await store.close();
}
const segment = `${srv.url}/v1/segment`;

function form(image: Buffer | null, fields: Record<string, string> = {}): FormData {
  const f = new FormData();
  if (image) f.append('image_file', new Blob([image], { type: 'image/jpeg' }), 'photo.jpg');
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  return f;
}

function post(body: FormData, headers: Record<string, string> = {}, apiKey: string | null = key.key): Promise<Response> {
  return fetch(segment, { method: 'POST', headers: { ...(apiKey === null ? {} : { 'x-api-key': apiKey }), ...headers }, body });
}

async function available(apiKey = key.key): Promise<number> {
  return ((await (await fetch(`${srv.url}/v1/account`, { headers: { 'x-api-key': apiKey } })).json()) as any).credits.available;
}

/** The error body, checked for Photoroom's shape (status_code equal to the HTTP status). */
async function photoroomError(t: Tap.Test, res: Response): Promise<{ status: number; type: string; detail: string }> {
  const body = (await res.json()) as any;
  t.same(Object.keys(body).sort(), ['detail', 'status_code', 'type'], 'the {detail, status_code, type} shape');
  t.equal(body.status_code, res.status, 'status_code is the HTTP status');
  return { status: res.status, type: body.type, detail: body.detail };
}

t.test('/v1/account and /v2/account: the ledger in their shapes, before and after a removal', async (t) => {
  const v1 = await fetch(`${srv.url}/v1/account`, { headers: { 'x-api-key': key.key } });
  t.equal(v1.status, 200);
  t.equal(v1.headers.get('access-control-allow-origin'), '*');
  t.same(await v1.json(), { credits: { available: 100, subscription: 0 } });
  const v2 = await fetch(`${srv.url}/v2/account`, { headers: { 'x-api-key': key.key } });
  t.same(await v2.json(), { images: { available: 100, subscription: 0 }, plan: 'basic' });
  const res = await post(form(cat));
  t.equal(res.status, 200);
  await res.arrayBuffer();
  t.equal(await available(), 99, 'a full-size segment costs 1 credit');
  t.same(await (await fetch(`${srv.url}/v2/account`, { headers: { 'x-api-key': key.key } })).json(), { images: { available: 99, subscription: 0 }, plan: 'basic' });
});

t.test('the defaults: a PNG cutout at full size, x-uncertainty-score = 1 - confidence', async (t) => {
  const res = await post(form(cat));
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'image/png');
  const score = Number(res.headers.get('x-uncertainty-score'));
  const confidence = Number(res.headers.get('x-cutout-confidence'));
  t.ok(score >= 0 && score <= 1, `a score from 0 to 1 (${score})`);
  t.ok(Math.abs(score - (1 - confidence)) < 0.0015, `1 - confidence (${confidence})`);
  t.match(res.headers.get('access-control-expose-headers'), /x-uncertainty-score/, 'a page may read it');
  t.notOk(res.headers.get('x-credits-charged'), 'no credit header: Photoroom has none on images');
  const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
  t.match(meta, { format: 'png', width: 451, height: 300, channels: 4 });
});

t.test('every parameter: format, channels, bg_color, size, crop, despill', async (t) => {
  const cases: [Record<string, string>, string, (m: import('sharp').Metadata, px: Buffer) => void][] = [
    [{ format: 'jpg' }, 'image/jpeg', (m) => t.match(m, { format: 'jpeg', width: 451 })],
    [{ format: 'webp' }, 'image/webp', (m) => t.match(m, { format: 'webp', width: 451 })],
    [{ format: 'png', channels: 'alpha' }, 'image/png', (m) => t.equal(m.channels, 1, 'the matte alone, one channel')],
    [{ bg_color: '#FF00FF' }, 'image/png', (_m, px) => t.same([...px.subarray(0, 3)], [255, 0, 255], 'a corner is the colour')],
    [{ bg_color: 'FF00FF' }, 'image/png', (_m, px) => t.same([...px.subarray(0, 3)], [255, 0, 255], 'hex without #')],
    [{ bg_color: 'red' }, 'image/png', (_m, px) => t.same([...px.subarray(0, 3)], [255, 0, 0], 'an HTML colour name')],
    [{ size: 'medium' }, 'image/png', (m) => t.match(m, { width: 451, height: 300 }, 'never enlarged')],
    [{ size: 'hd' }, 'image/png', (m) => t.match(m, { width: 451, height: 300 })],
    [{ crop: 'true' }, 'image/png', (m) => t.ok(m.width! * m.height! < 451 * 300, `cropped to the cat (${m.width}x${m.height})`)],
    [{ despill: 'true' }, 'image/png', (m) => t.match(m, { width: 451, height: 300 })],
    [{ despill: 'false' }, 'image/png', (m) => t.match(m, { width: 451, height: 300 })],
  ];
  for (const [fields, type, check] of cases) {
    const before = await available();
    const res = await post(form(cat, fields));
    t.equal(res.status, 200, JSON.stringify(fields));
    t.equal(res.headers.get('content-type'), type, `${JSON.stringify(fields)}: ${type}`);
    const bytes = Buffer.from(await res.arrayBuffer());
    const px = await sharp(bytes).removeAlpha().raw().toBuffer();
    check(await sharp(bytes).metadata(), px);
    t.equal(await available(), before - 1, `${JSON.stringify(fields)}: 1 credit`);
  }
  // A preview is Photoroom's 0.25 MP, and free at cutout's prices.
  const before = await available();
  const preview = await post(form(bigCup, { size: 'preview' }));
  const m = await sharp(Buffer.from(await preview.arrayBuffer())).metadata();
  t.ok(m.width! * m.height! <= 250_000 && m.width! * m.height! > 240_000, `preview: 0.25 MP of 1200x800 (${m.width}x${m.height})`);
  t.equal(await available(), before, 'previews are free');
});

t.test('Accept: application/json answers {"base64img"}; a browser\'s Accept gets the image', async (t) => {
  const res = await post(form(cat, { format: 'webp' }), { Accept: 'application/json' });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^application\/json/);
  t.ok(res.headers.get('x-uncertainty-score'), 'the score on the JSON answer too');
  const body = (await res.json()) as any;
  t.same(Object.keys(body), ['base64img']);
  t.match(await sharp(Buffer.from(body.base64img, 'base64')).metadata(), { format: 'webp', width: 451, height: 300 });
  const browser = await post(form(cat), { Accept: 'text/html,application/xhtml+xml,application/json;q=0.9,*/*;q=0.8' });
  t.equal(browser.headers.get('content-type'), 'image/png');
  await browser.arrayBuffer();
});

t.test('a test key is the sandbox: a free preview', async (t) => {
  const test = await createKey(srv.dataDir, ['--test', '--account', key.account]);
  const before = await available();
  const res = await post(form(bigCup), {}, test.key);
  t.equal(res.status, 200);
  const m = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
  t.ok(m.width! * m.height! <= 250_000 && m.width! < 1200, `a preview of 1200x800 (${m.width}x${m.height})`);
  t.equal(await available(), before, 'nothing charged');
});

t.test('every 400 cutout can meet, in Photoroom\'s shape, each charging nothing', async (t) => {
  const before = await available();
  const cases: [FormData, string, RegExp][] = [
    [form(null), 'missing_image', /^Please provide an image\.$/],
    [form(null, { format: 'png' }), 'missing_image', /image/],
    [form(cat, { format: 'gif' }), 'invalid_parameter', /format/],
    [form(cat, { channels: 'rgb' }), 'invalid_parameter', /channels/],
    [form(cat, { size: '4k' }), 'invalid_parameter', /size/],
    [form(cat, { bg_color: 'not-a-colour' }), 'invalid_parameter', /bg_color/],
    [form(cat, { crop: 'maybe' }), 'invalid_parameter', /crop/],
    [form(cat, { despill: 'maybe' }), 'invalid_parameter', /despill/],
    [form(Buffer.from('not an image at all')), 'invalid_image', /./],
  ];
  for (const [body, type, detail] of cases) {
    const err = await photoroomError(t, await post(body));
    t.equal(err.status, 400, type);
    t.equal(err.type, type);
    t.match(err.detail, detail);
  }
  const json = await photoroomError(t, await fetch(segment, { method: 'POST', headers: { 'x-api-key': key.key, 'Content-Type': 'application/json' }, body: '{}' }));
  t.match(json, { status: 400, type: 'missing_image' }, 'a body that is not multipart has no image');
  t.equal(await available(), before, 'no failed call is charged');
});

t.test('403, 402, 429 and 404 in Photoroom\'s shape', async (t) => {
  t.match(await photoroomError(t, await post(form(cat), {}, null)), { status: 403, type: 'invalid_api_key' }, 'no key');
  t.match(await photoroomError(t, await post(form(cat), {}, 'cut_live_nope')), { status: 403, type: 'invalid_api_key' }, 'a bad key');
  const bearer = await fetch(segment, { method: 'POST', headers: { Authorization: `Bearer ${key.key}` }, body: form(cat) });
  t.match(await photoroomError(t, bearer), { status: 403 }, 'the key only in x-api-key, as Photoroom reads it');
  const broke = await createKey(srv.dataDir);
  const store = await openStore(srv.dataDir);
  for (let i = 0; i < 10; i++) await store.ledger.recordRun({ id: crypto.randomUUID(), accountId: broke.account, keyId: broke.id, channel: 'api', input: 'x', size: 'full', credits: 1, ms: 1 });
  await store.close();
  const poor = await photoroomError(t, await post(form(cat), {}, broke.key));
  t.match(poor, { status: 402, type: 'unknown_error' }, "Photoroom's answer to exhausted credits");
  const free = await post(form(cat, { size: 'preview' }), {}, broke.key);
  t.equal(free.status, 200, 'a preview needs no credit');
  await free.arrayBuffer();
  t.match(await photoroomError(t, await fetch(`${srv.url}/v1/segmentation`, { method: 'POST', headers: { 'x-api-key': key.key } })), { status: 404, type: 'not_found' });
  t.match(await photoroomError(t, await fetch(`${srv.url}/v2/segment`, { headers: { 'x-api-key': key.key } })), { status: 404, type: 'not_found' });
  const limitedKey = await createKey(srv.dataDir);
  let limited: Response | null = null;
  for (let i = 0; i < 205 && !limited; i++) {
    const res = await fetch(`${srv.url}/v1/account`, { headers: { 'x-api-key': limitedKey.key } });
    if (res.status === 429) limited = res;
    else await res.arrayBuffer();
  }
  t.ok(limited, 'the 201st call in a minute is refused (--rate-limit 200)');
  t.ok(Number(limited!.headers.get('retry-after')) > 0, 'Retry-After');
  t.match(await photoroomError(t, limited!), { status: 429, type: 'rate_limit_exceeded' });
});

t.test("paths: Photoroom's /v1 and /v2 shadow neither v1's /api/v1 nor remove.bg's /v1.0", async (t) => {
  const removebg = await fetch(`${srv.url}/v1.0/account`, { headers: { 'X-Api-Key': key.key } });
  t.equal(removebg.status, 200);
  t.ok(((await removebg.json()) as any).data.attributes.credits, "remove.bg's account body");
  const v1 = await fetch(`${srv.url}/api/v1/account`, { headers: { Authorization: `Bearer ${key.key}` } });
  t.equal(v1.status, 200);
  t.type(((await v1.json()) as any).balance, 'number', "v1's account body");
  const unknown = await fetch(`${srv.url}/v1.0/segment`, { method: 'POST', headers: { 'X-Api-Key': key.key } });
  t.ok(((await unknown.json()) as any).errors, "under /v1.0 a not-found is remove.bg's");
});

t.test("a browser's preflight, as remove.bg's dialect answers it", async (t) => {
  for (const [p, method, methods] of [['/v1/segment', 'POST', 'POST, OPTIONS'], ['/v1/account', 'GET', 'GET, OPTIONS'], ['/v2/account', 'GET', 'GET, OPTIONS']]) {
    const res = await fetch(`${srv.url}${p}`, { method: 'OPTIONS', headers: { Origin: 'https://shop.example', 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': 'x-api-key' } });
    t.equal(res.status, 204, `OPTIONS ${p}`);
    t.equal(res.headers.get('access-control-allow-origin'), '*');
    t.equal(res.headers.get('access-control-allow-methods'), methods);
    t.equal(res.headers.get('access-control-allow-headers'), 'x-api-key');
    t.notOk(res.headers.get('access-control-allow-credentials'));
  }
});
