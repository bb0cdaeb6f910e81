/**
 * Clipdrop's dialect over raw HTTP on a real `cutout serve`, in the shape of Clipdrop's curl and
 * JavaScript samples (multipart `image_file`, `x-api-key`): the format by `Accept`,
 * `transparency_handling` both ways, `x-remaining-credits` and `x-credits-consumed` against the
 * ledger before and after, the 25-megapixel limit, every error as `{"error": ...}` with its
 * status (each charging nothing), and the preflight. One server; quality fast.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../../src/store/db.js';
import { balanceOf, createKey, startServe } from '../helpers/api-server.js';
import { FIXTURES } from '../helpers/cli.js';

const cat = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300

const srv = await startServe(t, ['--rate-limit', '200'], { env: { CUTOUT_QUALITY: 'fast' } });
const key = await createKey(srv.dataDir);
{
  // Enough credits for every case below (a new key has 10).
  const store = await openStore(srv.dataDir);
  await store.ledger.addCredits(key.account, 40);
  await store.close();
}
const endpoint = `${srv.url}/remove-background/v1`;

function form(image: Buffer | null, fields: Record<string, string> = {}, type = 'image/jpeg'): FormData {
  const f = new FormData();
  if (image) f.append('image_file', new Blob([image], { type }), 'photo');
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  return f;
}

function post(body: FormData, headers: Record<string, string> = {}, apiKey: string | null = key.key): Promise<Response> {
  return fetch(endpoint, { method: 'POST', headers: { ...(apiKey === null ? {} : { 'x-api-key': apiKey }), ...headers }, body });
}

const balance = () => balanceOf(srv.url, key.key);

/** The error body, checked for Clipdrop's shape: `{"error": string}` and nothing else. */
async function clipdropError(t: Tap.Test, res: Response): Promise<{ status: number; error: string }> {
  t.match(res.headers.get('content-type'), /^application\/json/);
  const body = (await res.json()) as any;
  t.same(Object.keys(body), ['error'], 'the {"error": ...} shape');
  t.type(body.error, 'string');
  return { status: res.status, error: body.error };
}

t.test('the default: a PNG of the input\'s size; the credit headers agree with the ledger', async (t) => {
  const before = await balance();
  t.equal(before, 50);
  const res = await post(form(cat));
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'image/png');
  t.equal(res.headers.get('x-credits-consumed'), '1');
  t.equal(res.headers.get('x-remaining-credits'), '49');
  t.match(res.headers.get('access-control-expose-headers'), /x-remaining-credits, x-credits-consumed/);
  t.match(await sharp(Buffer.from(await res.arrayBuffer())).metadata(), { format: 'png', width: 451, height: 300, channels: 4 });
  t.equal(await balance(), 49, 'the ledger says what the headers said');
});

t.test('the output format follows Accept', async (t) => {
  const cases: [string, string, string][] = [
    ['image/webp', 'image/webp', 'webp'],
    ['image/jpeg', 'image/jpeg', 'jpeg'],
    ['image/jpg', 'image/jpeg', 'jpeg'],
    ['image/png', 'image/png', 'png'],
    ['*/*', 'image/png', 'png'],
    ['image/*', 'image/png', 'png'],
    ['image/avif, image/webp;q=0.9, */*;q=0.1', 'image/webp', 'webp'],
    ['image/png;q=0.5, image/jpeg', 'image/jpeg', 'jpeg'],
  ];
  for (const [accept, type, format] of cases) {
    const before = await balance();
    const res = await post(form(cat), { Accept: accept });
    t.equal(res.status, 200, accept);
    t.equal(res.headers.get('content-type'), type, `Accept: ${accept}`);
    t.match(await sharp(Buffer.from(await res.arrayBuffer())).metadata(), { format, width: 451, height: 300 });
    t.equal(res.headers.get('x-remaining-credits'), String(before - 1));
  }
});

t.test('transparency_handling: an input with transparency comes back unchanged by default; discard_alpha_layer removes', async (t) => {
  // A PNG whose left half is transparent: it "already has transparency".
  const { data, info } = await sharp(cat).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  for (let y = 0; y < info.height; y++) for (let x = 0; x < info.width / 2; x++) data[(y * info.width + x) * 4 + 3] = 0;
  const cutOut = await sharp(data, { raw: info }).png().toBuffer();
  const before = await balance();
  const same = await post(form(cutOut, {}, 'image/png'));
  t.equal(same.status, 200);
  t.equal(same.headers.get('content-type'), 'image/png');
  t.ok(Buffer.from(await same.arrayBuffer()).equals(cutOut), 'the input, byte for byte');
  t.equal(same.headers.get('x-credits-consumed'), '0', 'no model ran: nothing charged');
  t.equal(same.headers.get('x-remaining-credits'), String(before));
  const explicit = await post(form(cutOut, { transparency_handling: 'return_input_if_non_opaque' }, 'image/png'));
  t.ok(Buffer.from(await explicit.arrayBuffer()).equals(cutOut), 'the default named');
  t.equal(await balance(), before);

  const discarded = await post(form(cutOut, { transparency_handling: 'discard_alpha_layer' }, 'image/png'));
  t.equal(discarded.status, 200);
  t.equal(discarded.headers.get('x-credits-consumed'), '1');
  const out = Buffer.from(await discarded.arrayBuffer());
  t.notOk(out.equals(cutOut), 'a new cutout');
  t.match(await sharp(out).metadata(), { format: 'png', width: 451, height: 300 });
  t.equal(await balance(), before - 1);

  // An alpha channel that is opaque everywhere is no transparency: the image is processed.
  const opaqueRgba = await sharp(cat).ensureAlpha().png().toBuffer();
  const processed = await post(form(opaqueRgba, {}, 'image/png'));
  t.equal(processed.headers.get('x-credits-consumed'), '1');
  t.notOk(Buffer.from(await processed.arrayBuffer()).equals(opaqueRgba));
});

t.test('the 25-megapixel limit, and every 400, each charging nothing', async (t) => {
  const before = await balance();
  // 5001x5000 is 25.005 MP: one row past Clipdrop's limit (and within cutout's own 50).
  const huge = await sharp({ create: { width: 5001, height: 5000, channels: 3, background: '#808080' } }).png({ compressionLevel: 9 }).toBuffer();
  const big = await clipdropError(t, await post(form(huge, {}, 'image/png')));
  t.equal(big.status, 400);
  t.match(big.error, /25 megapixels/);
  const cases: [FormData, RegExp][] = [
    [form(null), /image_file is required/],
    [form(null, { transparency_handling: 'discard_alpha_layer' }), /image_file is required/],
    [form(cat, { transparency_handling: 'keep' }), /transparency_handling/],
    [form(Buffer.from('not an image at all')), /./],
  ];
  for (const [body, error] of cases) {
    const err = await clipdropError(t, await post(body));
    t.equal(err.status, 400);
    t.match(err.error, error);
  }
  const json = await clipdropError(t, await fetch(endpoint, { method: 'POST', headers: { 'x-api-key': key.key, 'Content-Type': 'application/json' }, body: '{}' }));
  t.equal(json.status, 400, 'a body that is not multipart');
  t.equal(await balance(), before, 'no failed call is charged');
});

t.test('401, 403, 402, 406, 429 and 404 with their statuses', async (t) => {
  t.same(await clipdropError(t, await post(form(cat), {}, null)), { status: 401, error: 'No api key provided' });
  t.match(await clipdropError(t, await post(form(cat), {}, 'cut_live_nope')), { status: 403 });
  const broke = await createKey(srv.dataDir);
  const store = await openStore(srv.dataDir);
  for (let i = 0; i < 10; i++) await store.ledger.recordRun({ id: crypto.randomUUID(), accountId: broke.account, keyId: broke.id, channel: 'api', input: 'x', size: 'full', credits: 1, ms: 1 });
  await store.close();
  t.match(await clipdropError(t, await post(form(cat), {}, broke.key)), { status: 402 });
  const before = await balance();
  for (const accept of ['application/json', 'image/gif', 'text/html, image/avif']) {
    t.match(await clipdropError(t, await post(form(cat), { Accept: accept })), { status: 406 }, `Accept: ${accept}`);
  }
  t.equal(await balance(), before, 'a 406 is not charged');
  t.match(await clipdropError(t, await fetch(`${srv.url}/remove-background/v2`, { method: 'POST', headers: { 'x-api-key': key.key } })), { status: 404 });
  const limitedKey = await createKey(srv.dataDir);
  let limited: Response | null = null;
  for (let i = 0; i < 205 && !limited; i++) {
    // The cheapest call that passes the rate limit: an Accept it refuses (406, nothing read).
    const res = await post(form(cat), { Accept: 'application/json' }, limitedKey.key);
    if (res.status === 429) limited = res;
    else await res.arrayBuffer();
  }
  t.ok(limited, 'the 201st call in a minute is refused (--rate-limit 200)');
  t.ok(Number(limited!.headers.get('retry-after')) > 0, 'Retry-After');
  t.match(await clipdropError(t, limited!), { status: 429 });
});

t.test('a test key: a free preview; the headers say so', async (t) => {
  const test = await createKey(srv.dataDir, ['--test', '--account', key.account]);
  const before = await balance();
  const big = await sharp(cat).resize(1200, 800).jpeg().toBuffer();
  const res = await post(form(big), {}, test.key);
  t.equal(res.status, 200);
  t.equal(res.headers.get('x-credits-consumed'), '0');
  t.equal(res.headers.get('x-remaining-credits'), String(before));
  const m = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
  t.ok(m.width! < 1200, `a preview (${m.width}x${m.height})`);
});

t.test("a browser's preflight, as remove.bg's dialect answers it", async (t) => {
  const res = await fetch(endpoint, { method: 'OPTIONS', headers: { Origin: 'https://shop.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'x-api-key,accept' } });
  t.equal(res.status, 204);
  t.equal(res.headers.get('access-control-allow-origin'), '*');
  t.equal(res.headers.get('access-control-allow-methods'), 'POST, OPTIONS');
  t.equal(res.headers.get('access-control-allow-headers'), 'x-api-key,accept');
  t.notOk(res.headers.get('access-control-allow-credentials'));
});
