/**
 * Fast lane: an API may choose its own limits (ApiPlugin.limits, src/server/plugin.ts). One server
 * in process, the stand-in model, its shared rate limit 5 a minute, mounting v1 as it is,
 * remove.bg's dialect with a body limit of 20 kB, and rembg's with a rate limit of 2 a minute of
 * its own.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import sharp from 'sharp';
import { v1Api } from '../src/server/v1/api-v1.js';
import { removeBgApi } from '../src/server/dialects/api-removebg.js';
import { rembgApi } from '../src/server/dialects/api-rembg.js';
import { bearer, createKey, startApi, upload } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';

const BODY_LIMIT = 20_000;
const cat = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300, 27 kB: over remove.bg's limit here
const kitten = await sharp(cat).resize({ width: 160 }).jpeg().toBuffer(); // a few kB: under it

const srv = await startApi(t, ['--rate-limit', '5'], {
  apis: (ctx) => [
    v1Api(ctx),
    { ...removeBgApi(ctx), limits: { bodyBytes: BODY_LIMIT } },
    { ...rembgApi(ctx), limits: { rateLimitPerMinute: 2 } },
  ],
});

function form(field: string, image: Buffer, fields: Record<string, string> = {}): FormData {
  const f = new FormData();
  f.append(field, new Blob([image], { type: 'image/jpeg' }), 'photo.jpg');
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  return f;
}

/** POSTs `body` without a Content-Length (chunked, 4 kB at a time): the limit must hold while it streams. */
async function postChunked(url: string, body: FormData, headers: Record<string, string>): Promise<{ status: number; json: any }> {
  const encoded = new Request(url, { method: 'POST', body });
  const bytes = Buffer.from(await encoded.arrayBuffer());
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { ...headers, 'Content-Type': encoded.headers.get('content-type')! } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    req.on('error', reject);
    for (let at = 0; at < bytes.length; at += 4096) req.write(bytes.subarray(at, at + 4096));
    req.end();
  });
}

async function balance(key: string): Promise<number> {
  return ((await (await fetch(`${srv.url}/api/v1/account`, { headers: bearer(key) })).json()) as any).balance;
}

t.test('a body limit of its own: remove.bg\'s door refuses a larger upload in remove.bg\'s shape; v1 still takes it', async (t) => {
  const { key } = await createKey(srv.dataDir);
  const removebg = `${srv.url}/v1.0/removebg`;
  t.ok(kitten.length < BODY_LIMIT - 2_000 && cat.length > BODY_LIMIT, `the images sit either side of the limit (${kitten.length}, ${cat.length} bytes)`);
  const small = await fetch(removebg, { method: 'POST', headers: { 'X-Api-Key': key }, body: form('image_file', kitten, { size: 'preview' }) });
  t.equal(small.status, 200, 'an upload under the limit is answered');
  await small.arrayBuffer();

  const large = await fetch(removebg, { method: 'POST', headers: { 'X-Api-Key': key }, body: form('image_file', cat, { size: 'preview' }) });
  const body = (await large.json()) as any;
  t.equal(large.status, 400);
  t.match(body, { errors: [{ code: 'file_too_large', title: 'File exceeds limit' }] }, 'remove.bg\'s error shape and code');
  t.match(body.errors[0].detail, /20 kB body limit of this API/, 'the message names the API\'s limit');
  t.ok(large.headers.get('x-ratelimit-limit'), 'after the caller was counted, as every answer to a caller');

  const streamed = await postChunked(removebg, form('image_file', cat, { size: 'preview' }), { 'X-Api-Key': key });
  t.same([streamed.status, streamed.json.errors?.[0]?.code], [400, 'file_too_large'], 'a body without its length is cut at the limit too');

  const v1 = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(cat, { size: 'preview' }) });
  t.equal(v1.status, 200, 'v1 keeps the server\'s 25 MB: the limit is remove.bg\'s door\'s alone');
  await v1.arrayBuffer();
  t.equal(await balance(key), 10, 'previews only: nothing charged');
});

t.test('a rate limit of its own: rembg\'s door counts in a window apart from the shared one', async (t) => {
  const { key } = await createKey(srv.dataDir);
  const rembg = () => fetch(`${srv.url}/api/remove`, { method: 'POST', headers: { 'X-Api-Key': key }, body: form('file', kitten) });
  const seen: [number, string | null, string | null][] = [];
  for (let i = 0; i < 3; i++) {
    const res = await rembg();
    seen.push([res.status, res.headers.get('x-ratelimit-limit'), res.headers.get('x-ratelimit-remaining')]);
    if (res.status === 429) {
      t.match(await res.json(), { detail: /Over 2 requests per minute/ }, 'rembg\'s (FastAPI\'s) error shape');
      t.ok(Number(res.headers.get('retry-after')) > 0, 'with Retry-After');
    } else {
      await res.arrayBuffer();
    }
  }
  t.same(seen, [[200, '2', '1'], [200, '2', '0'], [429, '2', '0']], 'rembg\'s own limit of 2');
  const account = await fetch(`${srv.url}/api/v1/account`, { headers: bearer(key) });
  t.same([account.headers.get('x-ratelimit-limit'), account.headers.get('x-ratelimit-remaining')], ['5', '4'], 'the rembg requests did not count in the shared window');

  const other = await createKey(srv.dataDir);
  for (let i = 0; i < 5; i++) await (await fetch(`${srv.url}/api/v1/account`, { headers: bearer(other.key) })).arrayBuffer();
  const sharedSpent = await fetch(`${srv.url}/api/v1/account`, { headers: bearer(other.key) });
  t.equal(sharedSpent.status, 429, 'the shared window is spent');
  const still = await fetch(`${srv.url}/api/remove`, { method: 'POST', headers: { 'X-Api-Key': other.key }, body: form('file', kitten) });
  t.same([still.status, still.headers.get('x-ratelimit-remaining')], [200, '1'], 'and rembg\'s window is untouched by it');
  await still.arrayBuffer();
});
