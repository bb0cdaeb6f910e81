/**
 * Fast lane (docs/testing.md): Photoroom's Image Editing API v2, `POST /v2/edit` and `GET
 * /v2/edit` (src/server/dialects/photoroom-edit.ts), on the server in this process with the
 * stand-in model: its dotted parameters reach cutout's product-photo options (an exact output
 * size, padding, alignment, export format and dpi, a floating shadow, an outline), the answer
 * carries Photoroom's headers, and a generative parameter, a value cutout cannot honour or a bad
 * value is a 400 in Photoroom's shape naming the parameter as sent, with nothing charged.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { balanceOf, createKey, startApi } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';

const coffee = await fs.readFile(path.join(FIXTURES, 'coffee.jpg')); // 600x400
const photos = http.createServer((_req, res) => void res.writeHead(200, { 'Content-Type': 'image/jpeg' }).end(coffee));
await new Promise<void>((resolve) => photos.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise((resolve) => photos.close(resolve)));
const photoUrl = `http://127.0.0.1:${(photos.address() as AddressInfo).port}/coffee.jpg`;

const srv = await startApi(t, ['--allow-private-network', '--rate-limit', '100000']);
const key = await createKey(srv.dataDir);
const endpoint = `${srv.url}/v2/edit`;

function edit(fields: Record<string, string>, image: Buffer | null = coffee): Promise<Response> {
  const form = new FormData();
  if (image) form.append('imageFile', new Blob([image]), 'coffee.jpg');
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  return fetch(endpoint, { method: 'POST', headers: { 'x-api-key': key.key }, body: form });
}

/** The share of pixels with some opacity. */
async function visible(res: Response): Promise<number> {
  const { data, info } = await sharp(Buffer.from(await res.arrayBuffer())).ensureAlpha().extractChannel(3).raw().toBuffer({ resolveWithObject: true });
  let n = 0;
  for (const a of data) if (a > 0) n++;
  return n / (info.width * info.height);
}

t.test('POST: outputSize, padding, alignment, export.format and export.dpi reach the product-photo options', async (t) => {
  const before = await balanceOf(srv.url, key.key);
  const res = await edit({ outputSize: '400x300', padding: '0.1', verticalAlignment: 'bottom', 'export.format': 'png', 'export.dpi': '300' });
  t.equal(res.status, 200, res.status === 200 ? 'answered' : await res.clone().text());
  t.equal(res.headers.get('content-type'), 'image/png');
  t.match(res.headers.get('x-uncertainty-score'), /^0?\.\d+|^[01]$/, "Photoroom's x-uncertainty-score");
  const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
  t.same([meta.width, meta.height, meta.channels, meta.density], [400, 300, 4, 300], 'exactly 400x300, with alpha, at 300 dpi');
  t.equal(await balanceOf(srv.url, key.key), before - 1, 'one credit, as one full-size removal');
  const jpeg = await edit({ outputSize: '200x200', 'export.format': 'jpeg', 'background.color': 'FFFFFF' });
  t.equal(jpeg.headers.get('content-type'), 'image/jpeg', 'export.format=jpeg is a JPEG');
  t.same([(await sharp(Buffer.from(await jpeg.arrayBuffer())).metadata()).width], [200]);
});

t.test('GET with imageUrl, and shadow.mode=ai.floating draws the float shadow', async (t) => {
  const res = await fetch(`${endpoint}?${new URLSearchParams({ imageUrl: photoUrl, outputSize: '300x300' })}`, { headers: { 'x-api-key': key.key } });
  t.equal(res.status, 200, res.status === 200 ? 'GET /v2/edit?imageUrl=' : await res.clone().text());
  t.same([(await sharp(Buffer.from(await res.clone().arrayBuffer())).metadata()).width], [300]);
  const plain = await visible(res);
  const shadowed = await visible(await fetch(`${endpoint}?${new URLSearchParams({ imageUrl: photoUrl, outputSize: '300x300', 'shadow.mode': 'ai.floating' })}`, { headers: { 'x-api-key': key.key } }));
  t.ok(shadowed > plain, `the shadow adds visible pixels (${(plain * 100).toFixed(1)} % without, ${(shadowed * 100).toFixed(1)} % with)`);
  const red = async (res: Response) => {
    const { data, info } = await sharp(Buffer.from(await res.arrayBuffer())).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    let n = 0;
    for (let i = 0; i < info.width * info.height; i++) if (data[i * 4 + 3] > 200 && data[i * 4] > 220 && data[i * 4 + 1] < 40 && data[i * 4 + 2] < 40) n++;
    return n;
  };
  const ring = await red(await edit({ outputSize: '300x300', 'outline.width': '8px', 'outline.color': 'FF0000' }));
  const none = await red(await edit({ outputSize: '300x300' }));
  t.ok(ring > 300 && none < 10, `outline.width and outline.color draw a red ring (${ring} red pixels, ${none} without)`);
});

t.test('refusals: 400 in Photoroom\'s shape naming the parameter as sent, nothing charged', async (t) => {
  const before = await balanceOf(srv.url, key.key);
  const cases: [Record<string, string>, RegExp][] = [
    [{ 'background.prompt': 'a beach at sunset' }, /background\.prompt is a generative option/],
    [{ 'lighting.mode': 'ai.auto' }, /lighting\.mode is a generative option/],
    [{ removeBackground: 'false' }, /removeBackground=false is not supported/],
    [{ referenceBox: 'originalImage' }, /referenceBox=originalImage is not supported/],
    [{ scaling: 'stretch' }, /scaling/],
    [{ 'shadow.mode': 'ai.custom' }, /shadow\.mode is a generative option/],
    [{ 'outline.width': 'wide' }, /outline\.width/],
    [{ outputSize: '0x10' }, /outputSize/],
    [{ 'export.dpi': '9000' }, /export\.dpi/],
  ];
  for (const [fields, detail] of cases) {
    const res = await edit(fields);
    const body = (await res.json()) as { detail: string; status_code: number; type: string };
    t.same([res.status, body.status_code, body.type], [400, 400, 'invalid_parameter'], JSON.stringify(fields));
    t.match(body.detail, detail, `names it: ${body.detail}`);
  }
  const missing = await edit({ outputSize: '100x100' }, null);
  t.match([missing.status, ((await missing.json()) as { type: string }).type], [400, 'missing_image'], 'no image: missing_image');
  t.equal(await balanceOf(srv.url, key.key), before, 'nothing charged');
});
