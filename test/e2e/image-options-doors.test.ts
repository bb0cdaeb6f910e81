/**
 * remove.bg's image options through cutout's own doors: the v1 API (/remove and /jobs), the CLI's
 * flags and the library's options, each reading the same rows of the option table. One server,
 * small photos, quality fast.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { createRemover } from '../../src/index.js';
import { bearer, createKey, errorCode, startServe, tempDataDir, upload } from '../helpers/api-server.js';
import { FIXTURES, runCli } from '../helpers/cli.js';
import { until } from '../helpers/process.js';
import { readZip } from '../helpers/zip-read.js';

const cat = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const srv = await startServe(t, ['--allow-private-network']);
const key = await createKey(srv.dataDir);

const photos = http.createServer((req, res) => {
  if (req.url === '/cup.jpg') return void fs.readFile(path.join(FIXTURES, 'coffee.jpg')).then((b) => res.writeHead(200).end(b));
  if (req.url === '/cat.jpg') return void res.writeHead(200).end(cat);
  res.writeHead(404).end();
});
await new Promise<void>((resolve) => photos.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise((resolve) => photos.close(resolve)));
const photoUrl = (name: string) => `http://127.0.0.1:${(photos.address() as AddressInfo).port}/${name}`;

t.test('v1 /remove: crop_margin with format zip, a background picture with format auto, bad values', async (t) => {
  const zip = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(cat, { size: 'full', quality: 'fast', crop: 'true', crop_margin: '10px', format: 'zip' }) });
  t.equal(zip.status, 200);
  t.equal(zip.headers.get('content-type'), 'application/zip');
  const entries = readZip(Buffer.from(await zip.arrayBuffer()));
  t.same(entries.map((e) => e.name), ['color.jpg', 'alpha.png']);
  const alpha = await sharp(entries[1].data).metadata();
  t.ok(alpha.width! <= 451 + 20 && alpha.height! <= 300 + 20, `cropped with its margin (${alpha.width}x${alpha.height})`);

  const onCup = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(cat, { quality: 'fast', format: 'auto', bg_image_url: photoUrl('cup.jpg'), scale: '50%' }) });
  t.equal(onCup.status, 200);
  t.equal(onCup.headers.get('content-type'), 'image/jpeg', 'an opaque picture: auto is JPEG');
  await onCup.arrayBuffer();

  const missing = await errorCode(await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(cat, { quality: 'fast', bg_image_url: photoUrl('none.jpg') }) }));
  t.same([missing.status, missing.code], [400, 'invalid_request']);
  t.match(missing.message, /bg_image_url answered HTTP 404/);
  const roi = await errorCode(await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(cat, { roi: '0 0 500px 10px' }) }));
  t.same([roi.status, roi.code], [400, 'invalid_request']);
  t.match(roi.message, /exceeds the image/);
  const margin = await errorCode(await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(cat, { crop_margin: '51%' }) }));
  t.match([margin.status, margin.message], [400, /for crop_margin/]);
  const file = await errorCode(await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(cat, { bg_image_url: '/etc/passwd' }) }));
  t.match([file.status, file.message], [400, /bg_image_url is not a valid absolute URL/], 'a server never reads a path');
});

t.test('v1 /remove: a background picture uploaded as bg_image_file gives what the same picture by URL gives; /jobs refuses the upload', async (t) => {
  const cup = await fs.readFile(path.join(FIXTURES, 'coffee.jpg'));
  const withUpload = upload(cat, { quality: 'fast', size: 'preview' });
  withUpload.append('bg_image_file', new Blob([cup]), 'cup.jpg');
  const uploaded = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: withUpload });
  t.equal(uploaded.status, 200, uploaded.status === 200 ? 'uploaded' : await uploaded.clone().text());
  const byUrl = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: upload(cat, { quality: 'fast', size: 'preview', bg_image_url: photoUrl('cup.jpg') }) });
  t.equal(byUrl.status, 200);
  const pixels = async (r: Response) => sharp(Buffer.from(await r.arrayBuffer())).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const [a, b] = await Promise.all([pixels(uploaded), pixels(byUrl)]);
  t.same([a.info.width, a.info.height], [b.info.width, b.info.height]);
  t.equal(a.data[3], 255, 'the corner is the picture, opaque');
  t.ok(a.data.equals(b.data), 'the same pixels as with bg_image_url');

  const both = upload(cat, { bg_image_url: photoUrl('cup.jpg') });
  both.append('bg_image_file', new Blob([cup]), 'cup.jpg');
  const twice = await errorCode(await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key), body: both }));
  t.match([twice.status, twice.code, twice.message], [400, 'invalid_request', /one background picture; received bg_image_file and bg_image_url/]);
  const asJob = upload(cat);
  asJob.append('bg_image_file', new Blob([cup]), 'cup.jpg');
  const job = await errorCode(await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key.key), body: asJob }));
  t.match([job.status, job.code, job.message], [400, 'invalid_request', /A job takes its background picture by URL \(bg_image_url\)/]);
  const asText = await errorCode(await fetch(`${srv.url}/api/v1/remove`, {
    method: 'POST', headers: bearer(key.key, { 'Content-Type': 'application/json' }), body: JSON.stringify({ image_url: photoUrl('cat.jpg'), bg_image_file: 'cup.jpg' }),
  }));
  t.match([asText.status, asText.message], [400, /bg_image_file must be a multipart file upload/]);
});

t.test('v1 /jobs: a background picture, position and roi on a job', async (t) => {
  const res = await fetch(`${srv.url}/api/v1/jobs`, {
    method: 'POST', headers: bearer(key.key, { 'Content-Type': 'application/json' }),
    body: JSON.stringify({ image_url: photoUrl('cat.jpg'), size: 'full', quality: 'fast', format: 'auto', bg_color: '#00ff0080', position: '0% 0%', roi: '0% 0% 100% 100%' }),
  });
  t.equal(res.status, 202);
  const { job_id } = (await res.json()) as { job_id: string };
  const job = await until('the job', async () => {
    const j = (await (await fetch(`${srv.url}/api/v1/jobs/${job_id}`, { headers: bearer(key.key) })).json()) as any;
    return j.status === 'done' || j.status === 'failed' ? j : null;
  });
  t.equal(job.status, 'done', JSON.stringify(job.error));
  const result = await fetch(job.url);
  t.equal(result.headers.get('content-type'), 'image/png', 'a translucent background leaves transparency: auto is PNG');
  const { data } = await sharp(Buffer.from(await result.arrayBuffer())).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  t.equal(data[450 * 4 + 3], 0x80, 'a background pixel carries the colour\'s alpha');
});

t.test('CLI: --crop --crop-margin --format auto --bg-color; --format zip --bg-image; bad flags are usage errors', async (t) => {
  const dir = await tempDataDir(t);
  const input = path.join(dir, 'cat.jpg');
  await fs.writeFile(input, cat);
  const flat = await runCli([input, '--quality', 'fast', '--crop', '--crop-margin', '20px', '--format', 'auto', '--bg-color', 'green', '--data', dir, '-q']);
  t.equal(flat.code, 0, flat.stderr);
  const jpg = await sharp(path.join(dir, 'cat.cutout.jpg')).metadata();
  t.equal(jpg.format, 'jpeg');
  const zipRun = await runCli([input, '--quality', 'fast', '--format', 'zip', '--bg-image', path.join(FIXTURES, 'coffee.jpg'), '--data', dir, '-q']);
  t.equal(zipRun.code, 0, zipRun.stderr);
  const entries = readZip(await fs.readFile(path.join(dir, 'cat.cutout.zip')));
  t.same(entries.map((e) => e.name), ['color.jpg', 'alpha.png']);
  const opaque = await sharp(entries[1].data).extractChannel(0).raw().toBuffer();
  t.ok(opaque.every((v) => v === 255), 'over a picture the result is opaque: alpha.png is white');
  for (const bad of [['--scale', '5%'], ['--position', 'left'], ['--bg-image', path.join(dir, 'nothing.jpg')]]) {
    const r = await runCli([input, ...bad, '--data', dir]);
    t.equal(r.code, 2, `${bad.join(' ')}: ${r.stderr}`);
  }
});

t.test('library: cropMargin, scale, bgImage and format auto', async (t) => {
  const remover = await createRemover();
  t.teardown(() => remover.close());
  const r = await remover.remove(cat, { quality: 'fast', crop: true, cropMargin: '10%', format: 'auto', bgImage: path.join(FIXTURES, 'coffee.jpg') });
  t.equal(r.format, 'jpg');
  t.equal(r.contentType, 'image/jpeg');
  const zip = await remover.remove(cat, { quality: 'fast', format: 'zip', scale: '50%' });
  t.equal(zip.format, 'zip');
  t.same(readZip(zip.data).map((e) => e.name), ['color.jpg', 'alpha.png']);
  await t.rejects(remover.remove(cat, { roi: 'nowhere' }), { code: 'invalid_request' });
});
