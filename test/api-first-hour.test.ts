/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model;
 * what follows of `cutout serve` and the real model is what `npm run test:s3-results` runs.
 *
 * The HTTP side of issue 29 (what a new user tripped over): the sync route says which size it
 * served (X-Cutout-Size; a request without `size` gets a preview, unlike the CLI), every error's
 * `docs` links to an error reference the server serves itself (GET /api/v1/errors, JSON or HTML,
 * no key), and the private-network refusal names --allow-private-network. Real server
 * (`node bin/cutout serve`), real model, real SQLite, real HTTP.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ERROR_TABLE, type ErrorCode } from '../src/errors.js';
import { bearer, createKey, errorCode, startApi, upload } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const CODES = Object.keys(ERROR_TABLE) as ErrorCode[];

t.test('X-Cutout-Size says which size the sync route served', async (t) => {
  const srv = await startApi(t, ['--workers', '1']);
  const live = await createKey(srv.dataDir);
  const remove = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
    fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(live.key, headers), body: upload(chelsea, { quality: 'fast', ...fields }) });

  const plain = await remove({});
  t.equal(plain.status, 200);
  t.equal(plain.headers.get('x-cutout-size'), 'preview', 'no size: a preview (api-spec 2.1)');
  t.equal(plain.headers.get('x-credits-charged'), '0');

  const full = await remove({ size: 'full' }, { Accept: 'application/json' });
  t.equal(full.headers.get('x-cutout-size'), 'full');
  const metadata = (await full.json()) as Record<string, unknown>;
  t.same(Object.keys(metadata).sort(), ['credits_charged', 'credits_remaining', 'height', 'id', 'processing_ms', 'url', 'width'], 'the JSON metadata of 2.2 is unchanged');
  t.equal(metadata.width, 451);

  const auto = await remove({ size: 'auto' }, { 'Idempotency-Key': 'auto-1' });
  t.equal(auto.headers.get('x-cutout-size'), 'full', 'auto on a small image: full');
  const replay = await remove({ size: 'auto' }, { 'Idempotency-Key': 'auto-1' });
  t.equal(replay.headers.get('idempotent-replayed'), 'true');
  t.equal(replay.headers.get('x-cutout-size'), 'full', 'a replay says it too');
});

t.test('the error reference: served without a key, JSON or HTML, and every error links to it', async (t) => {
  const srv = await startApi(t);
  const res = await fetch(`${srv.url}/api/v1/errors`);
  t.equal(res.status, 200, 'no key needed');
  t.match(res.headers.get('content-type'), /^application\/json/);
  const { errors } = (await res.json()) as { errors: any[] };
  t.same(errors.map((e) => e.code), CODES, 'every code, in the table\'s order');
  for (const e of errors) {
    t.equal(e.status, ERROR_TABLE[e.code as ErrorCode].status, `${e.code}: status`);
    t.ok(e.statuses.includes(e.status), `${e.code}: statuses`);
    t.ok(e.meaning.length > 20 && e.fix.length > 20, `${e.code}: meaning and fix`);
    t.equal(e.docs, `${srv.url}/api/v1/errors#${e.code}`, `${e.code}: its own link`);
  }
  t.same(errors.find((e) => e.code === 'invalid_request').statuses, [400, 422]);
  t.match(errors.find((e) => e.code === 'invalid_request').fix, /--allow-private-network/);

  const page = await fetch(`${srv.url}/api/v1/errors`, { headers: { Accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), /^text\/html/);
  t.match(page.headers.get('content-security-policy'), /default-src 'none'/);
  const html = await page.text();
  for (const code of CODES) t.match(html, new RegExp(`<section id="${code}">`), `the page has an anchor for ${code}`);
  t.notMatch(html, /<script/i);

  // An error's docs: an absolute link to this server's reference, which answers.
  const missing = await errorCode(await fetch(`${srv.url}/api/v1/account`));
  t.same([missing.status, missing.code], [401, 'invalid_api_key']);
  t.equal(missing.body.error.docs, `${srv.url}/api/v1/errors#invalid_api_key`);
  const followed = await fetch(missing.body.error.docs.split('#')[0], { headers: { Accept: 'text/html' } });
  t.match(await followed.text(), /id="invalid_api_key"/, 'the link leads to the entry');

  const notFound = await errorCode(await fetch(`${srv.url}/nowhere`));
  t.equal(notFound.body.error.docs, `${srv.url}/api/v1/errors#not_found`);
  const badId = await errorCode(await fetch(`${srv.url}/api/v1/results/abc`));
  t.same([badId.status, badId.body.error.docs], [422, `${srv.url}/api/v1/errors#invalid_request`], 'the validation answer too');
});

t.test('with --base-url, errors link to the reference under that address', async (t) => {
  const srv = await startApi(t, ['--base-url', 'https://cutout.example.com/']);
  const missing = await errorCode(await fetch(`${srv.url}/api/v1/usage`));
  t.equal(missing.body.error.docs, 'https://cutout.example.com/api/v1/errors#invalid_api_key');
  const { errors } = (await (await fetch(`${srv.url}/api/v1/errors`)).json()) as { errors: any[] };
  t.equal(errors[0].docs, `https://cutout.example.com/api/v1/errors#${errors[0].code}`);
});

t.test('a callback or image_url on loopback is refused with the flag that allows it', async (t) => {
  const srv = await startApi(t);
  const live = await createKey(srv.dataDir);
  const job = await errorCode(await fetch(`${srv.url}/api/v1/jobs`, {
    method: 'POST',
    headers: bearer(live.key, { 'X-Callback-Url': 'http://127.0.0.1:9100/hook' }),
    body: upload(chelsea),
  }));
  t.same([job.status, job.code], [400, 'invalid_request']);
  t.match(job.message, /^X-Callback-Url host 127\.0\.0\.1 is not a public address: loopback\. .*start the server with --allow-private-network/);
  const sync = await errorCode(await fetch(`${srv.url}/api/v1/remove`, {
    method: 'POST',
    headers: bearer(live.key, { 'Content-Type': 'application/json' }),
    body: JSON.stringify({ image_url: 'http://127.0.0.1:9100/cat.jpg' }),
  }));
  t.same([sync.status, sync.code], [400, 'invalid_request']);
  t.match(sync.message, /image_url host 127\.0\.0\.1 is not a public address: loopback\. .*--allow-private-network/);
});
