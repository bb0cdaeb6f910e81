/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model.
 *
 * The one multipart intake (src/server/http.ts readMultipart) through every door (v1, remove.bg,
 * rembg, Photoroom, Clipdrop), with raw bodies written byte by byte as real clients write them
 * (/work/shared/clients.md's table, restated in docs/internals.md "One intake"): a part with a file
 * name is a file whatever its Content-Type (none, octet-stream, a wrong image type), a part
 * without one is a field even when typed text/plain; `filename*` alone, non-ASCII names, a quoted
 * boundary, a chunked body, `Expect: 100-continue`, fields after the file. Each door's answer
 * shows its field was read; each refusal is in the door's own shape and charges nothing.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../src/store/db.js';
import { partFileName } from '../src/server/http.js';
import { balanceOf, createKey, startApi } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';

// A small photo keeps 60 removals cheap: 160x106.
const photo = await sharp(await fs.readFile(path.join(FIXTURES, 'chelsea.jpg'))).resize(160).jpeg().toBuffer();

const srv = await startApi(t, ['--rate-limit', '1000'], { env: { CUTOUT_QUALITY: 'fast' } });
const key = await createKey(srv.dataDir);
{
  const store = await openStore(srv.dataDir);
  await store.ledger.addCredits(key.account, 100);
  await store.close();
}

/** One part of a hand-written multipart body. */
interface Part {
  /** The Content-Disposition after `form-data; ` exactly as written (name and file name parameters). */
  disposition: string;
  type?: string;
  data: Buffer | string;
}

function multipartBody(boundary: string, parts: Part[]): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; ${p.disposition}\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ''}\r\n`, 'utf8'));
    chunks.push(Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data, 'utf8'));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: Buffer; continued: boolean }

/**
 * POSTs `body` with node:http: with its Content-Length (`length`), without one in three chunks
 * (`chunked`), or with `Expect: 100-continue`, the body sent only once the server said 100.
 */
function send(url: string, headers: Record<string, string>, body: Buffer, mode: 'length' | 'chunked' | 'expect'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const sized = mode === 'chunked' ? { 'Transfer-Encoding': 'chunked' } : { 'Content-Length': String(body.length) };
    const req = http.request(url, { method: 'POST', headers: { ...headers, ...sized, ...(mode === 'expect' ? { Expect: '100-continue' } : {}) } });
    let continued = false;
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks), continued }));
      res.on('error', reject);
    });
    if (mode === 'expect') {
      req.on('continue', () => {
        continued = true;
        req.end(body);
      });
    } else if (mode === 'chunked') {
      const third = Math.ceil(body.length / 3);
      req.write(body.subarray(0, third));
      setTimeout(() => {
        req.write(body.subarray(third, 2 * third));
        setTimeout(() => req.end(body.subarray(2 * third)), 5);
      }, 5);
    } else {
      req.end(body);
    }
  });
}

/** A door: where it is, how its key goes, its file part's name, a field it reads and how its answer shows it. */
interface Door {
  name: string;
  path: string;
  auth: Record<string, string>;
  file: string;
  /** A field whose effect the answer shows. */
  field: [string, string];
  /** Credits one answer charges. */
  price: number;
  check(t: Tap.Test, a: Answer): Promise<void>;
  /** A field value the door refuses, and the door's own error shape for it. */
  badField: [string, string];
  refusal(t: Tap.Test, a: Answer, what: 'missing' | 'bad'): void;
}

const json = (a: Answer) => JSON.parse(a.body.toString('utf8'));

const doors: Door[] = [
  {
    name: 'v1', path: '/api/v1/remove', auth: { Authorization: `Bearer ${key.key}` }, file: 'image_file',
    field: ['format', 'webp'], price: 0, badField: ['format', 'tiff'],
    async check(t, a) {
      t.equal(a.headers['content-type'], 'image/webp', 'format=webp read as a field');
      t.equal(a.headers['x-credits-charged'], '0');
      t.ok(a.headers['x-cutout-confidence'], 'X-Cutout-Confidence');
      t.match(await sharp(a.body).metadata(), { format: 'webp', width: 160, height: 106, hasAlpha: true });
    },
    refusal(t, a, what) {
      t.equal(a.status, 400);
      t.equal(json(a).error.code, 'invalid_request', 'v1\'s {error: {code}}');
      if (what === 'bad') t.match(json(a).error.message, /format/);
    },
  },
  {
    name: 'remove.bg', path: '/v1.0/removebg', auth: { 'X-Api-Key': key.key }, file: 'image_file',
    field: ['type', 'product'], price: 0, badField: ['size', 'huge'],
    async check(t, a) {
      t.equal(a.headers['x-type'], 'product', 'type=product read as a field');
      t.equal(a.headers['x-credits-charged'], '0');
      t.equal(a.headers['x-width'], '160');
      t.match(await sharp(a.body).metadata(), { format: 'png', width: 160, height: 106, hasAlpha: true });
    },
    refusal(t, a, what) {
      t.equal(a.status, 400);
      t.equal(json(a).errors[0].code, what === 'missing' ? 'missing_source' : 'invalid_size', 'remove.bg\'s {errors: [{code}]}');
    },
  },
  {
    name: 'rembg', path: '/api/remove', auth: { 'X-Api-Key': key.key }, file: 'file',
    field: ['om', 'true'], price: 1, badField: ['om', 'maybe'],
    async check(t, a) {
      t.equal(a.headers['content-type'], 'image/png');
      t.ok(a.headers['x-cutout-confidence'], 'X-Cutout-Confidence');
      t.match(await sharp(a.body).metadata(), { format: 'png', width: 160, height: 106, hasAlpha: false }, 'om=true read as a field: the mask');
    },
    refusal(t, a, what) {
      t.equal(a.status, 422);
      t.same(json(a).detail[0].loc, ['body', what === 'missing' ? 'file' : 'om'], 'FastAPI\'s {detail: [{loc}]}');
    },
  },
  {
    name: 'Photoroom', path: '/v1/segment', auth: { 'x-api-key': key.key }, file: 'image_file',
    field: ['format', 'webp'], price: 1, badField: ['format', 'tiff'],
    async check(t, a) {
      t.equal(a.headers['content-type'], 'image/webp', 'format=webp read as a field');
      t.match(a.headers['x-uncertainty-score'], /^0(\.\d+)?$|^1$/, 'x-uncertainty-score');
      t.match(await sharp(a.body).metadata(), { format: 'webp', width: 160, height: 106, hasAlpha: true });
    },
    refusal(t, a, what) {
      t.equal(a.status, 400);
      t.match(json(a), { status_code: 400, type: what === 'missing' ? 'missing_image' : 'invalid_parameter' }, 'Photoroom\'s {detail, status_code, type}');
    },
  },
  {
    name: 'Clipdrop', path: '/remove-background/v1', auth: { 'x-api-key': key.key }, file: 'image_file',
    field: ['transparency_handling', 'discard_alpha_layer'], price: 1, badField: ['transparency_handling', 'bogus'],
    async check(t, a) {
      t.equal(a.headers['content-type'], 'image/png');
      t.equal(a.headers['x-credits-consumed'], '1');
      t.ok(a.headers['x-remaining-credits'], 'x-remaining-credits');
      t.match(await sharp(a.body).metadata(), { format: 'png', width: 160, height: 106, hasAlpha: true });
    },
    refusal(t, a, what) {
      t.equal(a.status, 400);
      const body = json(a);
      t.same(Object.keys(body), ['error'], 'Clipdrop\'s {error}');
      t.match(body.error, what === 'missing' ? /image_file is required/ : /transparency_handling/);
    },
  },
];

/** How a client writes the same request: the parts, the boundary's spelling and the sending. */
interface Client {
  name: string;
  parts(door: Door): Part[];
  quoted?: boolean;
  mode?: 'length' | 'chunked' | 'expect';
}

const fieldPart = (door: Door, type?: string): Part => ({ disposition: `name="${door.field[0]}"`, type, data: door.field[1] });

const clients: Client[] = [
  {
    name: 'Python requests: the file part without a Content-Type, the fields first',
    parts: (d) => [fieldPart(d), { disposition: `name="${d.file}"; filename="photo.jpg"`, data: photo }],
  },
  {
    name: 'Go, PHP CURLFile, Ruby Net::HTTP: application/octet-stream',
    parts: (d) => [{ disposition: `name="${d.file}"; filename="photo.jpg"`, type: 'application/octet-stream', data: photo }, fieldPart(d)],
  },
  {
    name: 'a wrong image type: image/png on a JPEG',
    parts: (d) => [{ disposition: `name="${d.file}"; filename="photo.png"`, type: 'image/png', data: photo }, fieldPart(d)],
  },
  {
    name: 'aiohttp: the text fields typed text/plain; charset=utf-8',
    parts: (d) => [fieldPart(d, 'text/plain; charset=utf-8'), { disposition: `name="${d.file}"; filename="photo.jpg"`, type: 'image/jpeg', data: photo }],
  },
  {
    name: 'filename* alone (RFC 5987), no Content-Type',
    parts: (d) => [{ disposition: `name="${d.file}"; filename*=utf-8''%D1%84%D0%BE%D1%82%D0%BE.jpg`, data: photo }, fieldPart(d)],
  },
  {
    name: '.NET MultipartFormDataContent: unquoted names, filename and filename*, no Content-Type, a quoted boundary',
    quoted: true,
    parts: (d) => [
      { disposition: `name=${d.field[0]}`, type: 'text/plain; charset=utf-8', data: d.field[1] },
      { disposition: `name=${d.file}; filename=photo.jpg; filename*=utf-8''photo.jpg`, data: photo },
    ],
  },
  {
    name: 'a non-ASCII file name, raw UTF-8 (requests, httpx)',
    parts: (d) => [fieldPart(d), { disposition: `name="${d.file}"; filename="фото кошки.jpg"`, data: photo }],
  },
  {
    name: 'a quoted boundary',
    quoted: true,
    parts: (d) => [fieldPart(d), { disposition: `name="${d.file}"; filename="photo.jpg"`, type: 'image/jpeg', data: photo }],
  },
  {
    name: 'chunked, without Content-Length',
    mode: 'chunked',
    parts: (d) => [fieldPart(d), { disposition: `name="${d.file}"; filename="photo.jpg"`, data: photo }],
  },
  {
    name: 'Expect: 100-continue (curl, PHP curl)',
    mode: 'expect',
    parts: (d) => [fieldPart(d), { disposition: `name="${d.file}"; filename="photo.jpg"`, type: 'application/octet-stream', data: photo }],
  },
  {
    name: 'the fields after the file',
    parts: (d) => [{ disposition: `name="${d.file}"; filename="photo.jpg"`, data: photo }, fieldPart(d)],
  },
];

function request(door: Door, parts: Part[], { quoted = false, mode = 'length' as Client['mode'] } = {}): Promise<Answer> {
  const boundary = quoted ? `cutout:${crypto.randomUUID()}` : crypto.randomBytes(16).toString('hex');
  const type = `multipart/form-data; boundary=${quoted ? `"${boundary}"` : boundary}`;
  return send(`${srv.url}${door.path}`, { ...door.auth, 'Content-Type': type }, multipartBody(boundary, parts), mode ?? 'length');
}

t.test('partFileName: a file name in filename, filename* (RFC 5987) or neither', async (t) => {
  t.equal(partFileName('form-data; name="image_file"; filename="photo.jpg"'), 'photo.jpg');
  t.equal(partFileName("form-data; name=image_file; filename=photo.jpg; filename*=utf-8''%D1%84.jpg"), 'ф.jpg', 'filename* wins (RFC 6266)');
  t.equal(partFileName("form-data; name=\"image_file\"; filename*=UTF-8''caf%C3%A9.jpg"), 'café.jpg');
  t.equal(partFileName("form-data; name=\"image_file\"; filename*=iso-8859-1'en'caf%E9.jpg"), 'café.jpg');
  t.equal(partFileName('form-data; name="image_file"; filename=""'), '', 'an empty name is a name (a browser\'s file input)');
  t.equal(partFileName('form-data; name="size"'), null);
  t.equal(partFileName('form-data; name="filename"'), null, 'a field called filename is a field');
  t.equal(partFileName('form-data; name="a;b"; filename="x\\"y.jpg"'), 'x"y.jpg', 'quoted strings with ; and escaped quotes');
  t.equal(partFileName(undefined), null);
});

for (const door of doors) {
  t.test(`${door.name}: every client's way of writing the same upload is answered`, async (t) => {
    for (const client of clients) {
      await t.test(client.name, async (t) => {
        const before = await balanceOf(srv.url, key.key);
        const a = await request(door, client.parts(door), client);
        t.equal(a.status, 200, a.status === 200 ? 'answered' : a.body.toString('utf8'));
        if (a.status !== 200) return;
        if (client.mode === 'expect') t.ok(a.continued, 'the server said 100 Continue before the body');
        await door.check(t, a);
        t.equal(await balanceOf(srv.url, key.key), before - door.price, `charged ${door.price}`);
      });
    }
  });

  t.test(`${door.name}: refusals in its own shape, nothing charged`, async (t) => {
    const before = await balanceOf(srv.url, key.key);
    // An image part typed image/jpeg but without a file name is a field: no image was given.
    const noName = await request(door, [{ disposition: `name="${door.file}"`, type: 'image/jpeg', data: 'not a file' }, fieldPart(door)]);
    door.refusal(t, noName, 'missing');
    // A field typed text/plain is read as a field: its bad value is refused by the door.
    const bad = await request(door, [
      { disposition: `name="${door.badField[0]}"`, type: 'text/plain; charset=utf-8', data: door.badField[1] },
      { disposition: `name="${door.file}"; filename="photo.jpg"`, data: photo },
    ]);
    door.refusal(t, bad, 'bad');
    t.equal(await balanceOf(srv.url, key.key), before, 'nothing charged');
  });
}
