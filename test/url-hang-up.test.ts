/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model.
 *
 * A client that hangs up while its `image_url` (or `bg_image_url`) is being downloaded ends the
 * download: the door's work signal reaches fetchImageUrl (src/net/fetch-url.ts), whose socket to
 * the image's server closes at once instead of at the fetch's own 15 s timeout. The image server
 * here, on 127.0.0.1 (the server runs with --allow-private-network), trickles a byte every 50 ms
 * and never finishes. Nothing is charged.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import { CutoutError } from '../src/errors.js';
import { fetchImageUrl } from '../src/net/fetch-url.js';
import { balanceOf, createKey, startApi } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';

const photo = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg'));

/** Each download the trickling server has begun: when its socket closed, if it has. */
interface Download { path: string; started: number; bytes: number; closed: Promise<number> }
const downloads: Download[] = [];
let announce: ((d: Download) => void) | null = null;

const trickle = http.createServer((req, res) => {
  const socket: Socket = req.socket;
  const d: Download = { path: req.url ?? '', started: Date.now(), bytes: 0, closed: new Promise((resolve) => socket.once('close', () => resolve(Date.now()))) };
  downloads.push(d);
  res.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': String(photo.length) });
  let at = 0;
  const timer = setInterval(() => {
    if (at >= photo.length - 1) return; // never the last byte
    res.write(photo.subarray(at, at + 1));
    at += 1;
    d.bytes = at;
    if (at === 3) announce?.(d);
  }, 50);
  socket.once('close', () => clearInterval(timer));
});
await new Promise<void>((resolve) => trickle.listen(0, '127.0.0.1', resolve));
t.teardown(() => {
  trickle.closeAllConnections();
  return new Promise((resolve) => trickle.close(resolve));
});
const slowUrl = (name: string) => `http://127.0.0.1:${(trickle.address() as AddressInfo).port}/${name}`;

/** Resolves with the next download once it has sent a few bytes. */
function nextDownload(): Promise<Download> {
  return new Promise((resolve) => (announce = (d) => { announce = null; resolve(d); }));
}

/** Resolves with the close time, or null when the socket is still open after `ms`. */
function closedWithin(d: Download, ms: number): Promise<number | null> {
  return Promise.race([d.closed, new Promise<null>((resolve) => setTimeout(() => resolve(null), ms))]);
}

// Every await before the first test: tap may end the root test once its subtests are done.
const srv = await startApi(t, ['--allow-private-network', '--rate-limit', '100'], { env: { CUTOUT_QUALITY: 'fast' } });
const key = await createKey(srv.dataDir);

t.test('fetchImageUrl: an abort ends the download, its socket closed, with the signal\'s reason', async (t) => {
  const controller = new AbortController();
  const started = nextDownload();
  const fetching = fetchImageUrl(slowUrl('direct.jpg'), { allowPrivateNetwork: true, signal: controller.signal });
  fetching.catch(() => undefined);
  const d = await started;
  const reason = new CutoutError('processing_failed', 'The client closed the connection.', { reason: 'client_closed' });
  const abortedAt = Date.now();
  controller.abort(reason);
  await t.rejects(fetching, reason, 'rejects with the reason the signal was aborted with');
  const closedAt = await closedWithin(d, 2000);
  t.ok(closedAt !== null && closedAt - abortedAt < 1000, `the socket closed ${closedAt === null ? 'not within 2 s' : `${closedAt - abortedAt} ms`} after the abort`);
  // An already aborted signal starts nothing.
  const before = downloads.length;
  await t.rejects(fetchImageUrl(slowUrl('never.jpg'), { allowPrivateNetwork: true, signal: AbortSignal.abort(reason) }), reason);
  t.equal(downloads.length, before, 'no connection was made');
});


interface Door { name: string; path: string; method: 'GET' | 'POST'; headers: Record<string, string>; body?: string }
const json = { 'Content-Type': 'application/json' };
const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
const b64 = photo.toString('base64');
const doors: Door[] = [
  { name: 'v1 image_url', path: '/api/v1/remove', method: 'POST', headers: { Authorization: `Bearer ${key.key}`, ...json }, body: JSON.stringify({ image_url: slowUrl('v1.jpg'), size: 'full' }) },
  { name: 'v1 bg_image_url', path: '/api/v1/remove', method: 'POST', headers: { Authorization: `Bearer ${key.key}`, ...json }, body: JSON.stringify({ image_file_b64: b64, bg_image_url: slowUrl('v1-bg.jpg') }) },
  { name: 'remove.bg image_url', path: '/v1.0/removebg', method: 'POST', headers: { 'X-Api-Key': key.key, ...form }, body: new URLSearchParams({ image_url: slowUrl('rbg.jpg'), size: 'auto' }).toString() },
  { name: 'remove.bg bg_image_url', path: '/v1.0/removebg', method: 'POST', headers: { 'X-Api-Key': key.key, ...form }, body: new URLSearchParams({ image_file_b64: b64, bg_image_url: slowUrl('rbg-bg.jpg') }).toString() },
  { name: 'rembg GET ?url=', path: `/api/remove?url=${encodeURIComponent(slowUrl('rembg.jpg'))}`, method: 'GET', headers: { 'X-Api-Key': key.key } },
];

for (const door of doors) {
  t.test(`${door.name}: the client's hang-up ends the download`, async (t) => {
    const balance = await balanceOf(srv.url, key.key);
    const started = nextDownload();
    const req = http.request(`${srv.url}${door.path}`, { method: door.method, headers: door.headers });
    req.on('error', () => undefined); // the hang-up is ours
    req.end(door.body);
    const d = await started;
    t.ok(d.path.endsWith('.jpg'), `the server is downloading ${d.path}`);
    const hungUpAt = Date.now();
    req.destroy();
    const closedAt = await closedWithin(d, 2000);
    t.ok(closedAt !== null && closedAt - hungUpAt < 1000, `the download's socket closed ${closedAt === null ? 'not within 2 s' : `${closedAt - hungUpAt} ms`} after the hang-up`);
    t.equal(await balanceOf(srv.url, key.key), balance, 'nothing charged');
  });
}
