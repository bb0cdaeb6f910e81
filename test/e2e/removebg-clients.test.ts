/**
 * remove.bg's real clients, unchanged, against a real `cutout serve`: the npm client `remove.bg`
 * 1.3.0 (unirest/request; multipart for files, JSON for URLs and base64; Accept: application/json)
 * and remove.bg's documented Node sample (fetch + FormData + fs.openAsBlob, `size=auto`). A
 * preload (fixtures/redirect-https.cjs) points their https://api.remove.bg at the test server.
 * One server, quality fast (the server's configured default, as remove.bg's clients cannot name one).
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../../src/store/db.js';
import { createKey, startServe, tempDataDir } from '../helpers/api-server.js';
import { FIXTURES } from '../helpers/cli.js';
import { runRedirected } from '../helpers/hosted-client.js';

const CLIENTS = path.join(FIXTURES, 'removebg');
const cat = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const cup = await fs.readFile(path.join(FIXTURES, 'coffee.jpg')); // 600x400

const srv = await startServe(t, ['--allow-private-network'], { env: { CUTOUT_QUALITY: 'fast' } });
const key = await createKey(srv.dataDir);
const broke = await createKey(srv.dataDir);
{
  const store = await openStore(srv.dataDir);
  for (let i = 0; i < 10; i++) await store.ledger.recordRun({ id: crypto.randomUUID(), accountId: broke.account, keyId: broke.id, channel: 'api', input: 'x', size: 'full', credits: 1, ms: 1 });
  await store.close();
}
const work = await tempDataDir(t);

// The photos by URL, as a client's image_url and bg_image_url reach them.
const photos = http.createServer((req, res) => {
  const name = req.url === '/cat.jpg' ? 'chelsea.jpg' : req.url === '/cup.jpg' ? 'coffee.jpg' : null;
  if (!name) return void res.writeHead(404).end();
  void fs.readFile(path.join(FIXTURES, name)).then((b) => res.writeHead(200, { 'Content-Type': 'image/jpeg' }).end(b));
});
await new Promise<void>((resolve) => photos.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise((resolve) => photos.close(resolve)));
const photoUrl = (name: string) => `http://127.0.0.1:${(photos.address() as AddressInfo).port}/${name}`;

/** Runs a client script under the redirecting preload; resolves with its stdout and exit code. */
const runClient = (args: string[]) => runRedirected(['api.remove.bg'], srv.url, args);

interface ClientAnswer { ok: boolean; result?: Record<string, string | number | undefined>; errors?: { title: string; code: string; detail?: string }[] }

async function npmClient(call: string, options: Record<string, unknown>): Promise<ClientAnswer> {
  const r = await runClient([path.join(CLIENTS, 'npm-client.cjs'), JSON.stringify({ call, options })]);
  if (r.code !== 0 || !r.stdout.trim()) throw new Error(`npm client exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as ClientAnswer;
}

async function balance(apiKey: string): Promise<number> {
  const res = await fetch(`${srv.url}/v1.0/account`, { headers: { 'X-Api-Key': apiKey } });
  return ((await res.json()) as any).data.attributes.credits.total;
}

t.test('npm remove.bg: a file at the default size (preview), written by the client', async (t) => {
  const outputFile = path.join(work, 'cat-preview.png');
  const before = await balance(key.key);
  const r = await npmClient('removeBackgroundFromImageFile', { path: path.join(FIXTURES, 'chelsea.jpg'), apiKey: key.key, outputFile });
  t.ok(r.ok, JSON.stringify(r.errors));
  t.match(r.result, { creditsCharged: '0', detectedType: 'other', resultWidth: '451', resultHeight: '300', rateLimit: String });
  const meta = await sharp(await fs.readFile(outputFile)).metadata();
  t.match(meta, { format: 'png', width: 451, height: 300, hasAlpha: true }, 'format auto: a PNG with transparency');
  t.equal(await balance(key.key), before, 'a preview is free');
});

t.test('npm remove.bg: a URL at size full, with crop and a margin; the charge is what the account loses', async (t) => {
  const outputFile = path.join(work, 'cat-full.png');
  const before = await balance(key.key);
  const r = await npmClient('removeBackgroundFromImageUrl', { url: photoUrl('cat.jpg'), apiKey: key.key, size: 'full', type: 'animal', crop: true, crop_margin: '10px', outputFile });
  t.ok(r.ok, JSON.stringify(r.errors));
  t.equal(r.result!.creditsCharged, '1');
  t.equal(r.result!.detectedType, 'animal', 'X-Type is the requested type');
  t.equal(await balance(key.key), before - 1);
  const meta = await sharp(await fs.readFile(outputFile)).metadata();
  t.equal(meta.width, Number(r.result!.resultWidth));
  t.ok(meta.width! < 451 + 20 && meta.height! <= 300 + 20, `cropped to the subject and its margin (${meta.width}x${meta.height})`);
  const { data, info } = await sharp(await fs.readFile(outputFile)).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  let topRow = 0;
  for (let x = 0; x < info.width; x++) topRow += data[x * 4 + 3];
  t.equal(topRow, 0, 'the margin is transparent');
});

t.test('npm remove.bg: base64 at size medium, channels alpha, and a background picture by URL', async (t) => {
  const matteFile = path.join(work, 'cup-alpha.png');
  const alpha = await npmClient('removeBackgroundFromImageBase64', { base64img: cup.toString('base64'), apiKey: key.key, size: 'medium', channels: 'alpha', outputFile: matteFile });
  t.ok(alpha.ok, JSON.stringify(alpha.errors));
  t.match(await sharp(await fs.readFile(matteFile)).metadata(), { width: 600, height: 400, channels: 1 }, 'the matte alone');
  const withPicture = path.join(work, 'cup-on-cat.jpg');
  const bg = await npmClient('removeBackgroundFromImageBase64', { base64img: cup.toString('base64'), apiKey: key.key, bg_image_url: photoUrl('cat.jpg'), outputFile: withPicture });
  t.ok(bg.ok, JSON.stringify(bg.errors));
  const meta = await sharp(await fs.readFile(withPicture)).metadata();
  t.match(meta, { format: 'jpeg', width: 600, height: 400 }, 'an opaque result: format auto gives JPEG');
});

t.test('npm remove.bg: a wrong key and an empty account are rejected with remove.bg\'s errors', async (t) => {
  const wrong = await npmClient('removeBackgroundFromImageUrl', { url: photoUrl('cat.jpg'), apiKey: 'cut_live_not_a_key' });
  t.notOk(wrong.ok);
  t.match(wrong.errors, [{ code: 'auth_failed', title: String }]);
  const poor = await npmClient('removeBackgroundFromImageFile', { path: path.join(FIXTURES, 'chelsea.jpg'), apiKey: broke.key, size: 'full' });
  t.notOk(poor.ok);
  t.match(poor.errors, [{ code: 'insufficient_credits', title: 'Insufficient credits' }]);
  const missing = await npmClient('removeBackgroundFromImageUrl', { url: photoUrl('nothing.jpg'), apiKey: key.key });
  t.match(missing.errors, [{ code: 'failed_image_download' }]);
});

t.test("remove.bg's Node sample (fetch + FormData + Blob, size=auto) gets the image", async (t) => {
  const out = path.join(work, 'no-bg.png');
  const r = await runClient([path.join(CLIENTS, 'node-sample.mjs'), key.key, path.join(FIXTURES, 'coffee.jpg'), out]);
  t.equal(r.code, 0, r.stderr);
  t.match(await sharp(await fs.readFile(out)).metadata(), { format: 'png', width: 600, height: 400, hasAlpha: true });
  const wrong = await runClient([path.join(CLIENTS, 'node-sample.mjs'), 'nope', path.join(FIXTURES, 'coffee.jpg'), out]);
  t.not(wrong.code, 0);
  t.match(wrong.stderr, /403: Forbidden/);
});
