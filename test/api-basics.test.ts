/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model;
 * what follows of `cutout serve` and the real model is what `npm run test:s3-results` runs.
 *
 * The server's rules that need no cutout: health, OpenAPI, auth, rate limit, request parsing,
 * result ids, marketplace headers, credits checked before work, and a clean stop. Real server
 * (`node bin/cutout serve`), real SQLite, real HTTP.
 */
import t from 'tap';
import crypto from 'node:crypto';
import net from 'node:net';
import { openStore } from '../src/store/db.js';
import { bearer, createKey, errorCode, startApi, upload } from './helpers/api-server.js';
import { runCli } from './helpers/cli.js';

const tinyPng = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=', 'base64');

function form(fields: Record<string, string | Blob>): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  return f;
}

t.test('health, openapi and unknown routes need no key', async (t) => {
  const srv = await startApi(t, ['--workers', '2']);
  t.match(srv.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const health = await fetch(`${srv.url}/api/v1/health`);
  t.equal(health.status, 200);
  const body = (await health.json()) as any;
  t.match(body, { status: 'ok', inference: 'local', version: /^\d+\.\d+\.\d+/, model: 'isnet-medium', workers: 2, queue: { queued: 0, processing: 0 } });
  t.notOk(health.headers.get('x-ratelimit-limit'), 'no rate-limit headers on an unauthenticated route');

  const doc = (await (await fetch(`${srv.url}/api/v1/openapi.json`)).json()) as any;
  t.equal(doc.openapi, '3.1.0');
  t.ok(doc.paths['/api/v1/remove']);

  const missing = await errorCode(await fetch(`${srv.url}/api/v2/remove`));
  t.same([missing.status, missing.code], [404, 'not_found']);
  t.equal(missing.body.error.docs, `${srv.url}/api/v1/errors#not_found`, 'docs: the reference this server serves');
});

/** Sends raw bytes and returns what the server answered before it closed the connection. */
function rawRequest(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    let answer = '';
    socket.on('data', (d) => { answer += d.toString(); });
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

t.test('requests Node\'s HTTP parser refuses still get the part 7 JSON error', async (t) => {
  const srv = await startApi(t);
  const cases = [
    ['a malformed header line', 'GET /api/v1/health HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n', /not valid HTTP/],
    ['headers over 16 KB', `GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, /headers are too large/],
    ['a bad Content-Length', 'POST /api/v1/remove HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', /Content-Length/],
  ] as const;
  for (const [name, request, message] of cases) {
    const answer = await rawRequest(srv.url, request);
    const [head, body] = answer.split('\r\n\r\n');
    t.match(head, /^HTTP\/1\.1 400 /, `${name}: status 400`);
    t.match(head, /content-type: application\/json/i, `${name}: a JSON body`);
    t.match(JSON.parse(body), { error: { code: 'invalid_request', message, docs: `${srv.url}/api/v1/errors#invalid_request` } }, name);
  }
  t.equal((await fetch(`${srv.url}/api/v1/health`)).status, 200, 'the server still answers');
});

t.test('authentication: missing, malformed, unknown and revoked keys are 401 invalid_api_key', async (t) => {
  const srv = await startApi(t);
  const live = await createKey(srv.dataDir);
  const cases: [string, Record<string, string>][] = [
    ['missing', {}],
    ['not bearer', { Authorization: `Basic ${live.key}` }],
    ['malformed', bearer('cut_live_x')],
    ['unknown', bearer(`cut_live_${crypto.randomBytes(24).toString('base64url')}`)],
  ];
  for (const [name, headers] of cases) {
    const res = await fetch(`${srv.url}/api/v1/account`, { headers });
    t.equal(res.headers.get('www-authenticate'), 'Bearer realm="cutout"', `${name}: the scheme is named`);
    const e = await errorCode(res);
    t.same([e.status, e.code], [401, 'invalid_api_key'], name);
    if (name === 'unknown') t.match(e.message, /No key in this server's store \(sqlite\) matches.*another data directory or --store/, 'an unknown key: the hint names the store');
  }
  const xApiKey = await errorCode(await fetch(`${srv.url}/api/v1/account`, { headers: { 'X-Api-Key': live.key } }));
  t.match(xApiKey.message, /the v1 API does not read X-Api-Key/, 'X-Api-Key on v1: the 401 says which header to use');
  const ok = await fetch(`${srv.url}/api/v1/account`, { headers: bearer(live.key) });
  t.equal(ok.status, 200);
  t.same(await ok.json(), { account_id: live.account, balance: 10, plan: 'free', credits_used_this_month: 0, test: false });

  t.equal((await runCli(['keys', 'revoke', live.id, '--data', srv.dataDir])).code, 0);
  const revoked = await errorCode(await fetch(`${srv.url}/api/v1/account`, { headers: bearer(live.key) }));
  t.same([revoked.status, revoked.code], [401, 'invalid_api_key'], 'revoked from the CLI while the server runs');
});

t.test('rate limit: headers on every authenticated answer, 429 with Retry-After, per key', async (t) => {
  const srv = await startApi(t, ['--rate-limit', '3']);
  const a = await createKey(srv.dataDir);
  const b = await createKey(srv.dataDir);
  const before = Math.floor(Date.now() / 1000);
  const remaining: string[] = [];
  for (let i = 0; i < 3; i++) {
    // Errors after authentication count and carry the headers too: here a bad request.
    const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(a.key, { 'Content-Type': 'text/plain' }), body: 'x' });
    t.equal(res.status, 400);
    t.equal(res.headers.get('x-ratelimit-limit'), '3');
    remaining.push(res.headers.get('x-ratelimit-remaining')!);
    const reset = Number(res.headers.get('x-ratelimit-reset'));
    t.ok(reset >= before + 59 && reset <= before + 62, `reset ${reset} is about a minute ahead`);
  }
  t.same(remaining, ['2', '1', '0']);
  const limited = await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(a.key) });
  const e = await errorCode(limited);
  t.same([e.status, e.code], [429, 'rate_limited']);
  const retry = Number(limited.headers.get('retry-after'));
  t.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
  t.equal(limited.headers.get('x-ratelimit-remaining'), '0');
  const other = await fetch(`${srv.url}/api/v1/usage`, { headers: bearer(b.key) });
  t.equal(other.status, 200, 'another key has its own window');
});

t.test('request parsing: one source, known parameters, sizes capped while reading', async (t) => {
  const srv = await startApi(t);
  const { key } = await createKey(srv.dataDir);
  const post = (body: NonNullable<RequestInit['body']>, headers: Record<string, string> = {}) =>
    fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key, headers), body });
  const json = (obj: unknown) => post(JSON.stringify(obj), { 'Content-Type': 'application/json' });
  const b64 = tinyPng.toString('base64');

  const expectations: [string, Promise<Response>, number, string, RegExp][] = [
    ['no source', json({ size: 'preview' }), 400, 'invalid_request', /exactly one image source/],
    ['two sources', json({ image_url: 'https://example.com/a.png', image_file_b64: b64 }), 400, 'invalid_request', /image_url and image_file_b64/],
    ['file and url', post(form({ image_file: new Blob([tinyPng]), image_url: 'https://example.com/a.png' })), 400, 'invalid_request', /image_file and image_url/],
    // remove.bg's image options are cutout's own (cli-contract); channels alone stays unsupported.
    ['unsupported channels', json({ image_file_b64: b64, channels: 'alpha' }), 400, 'invalid_request', /channels is not supported/],
    ['roi outside the image', json({ image_file_b64: b64, roi: '0 0 10 10' }), 400, 'invalid_request', /roi .* exceeds the image's 1x1/],
    ['bg_image_url not a URL', post(form({ image_file: new Blob([tinyPng]), bg_image_url: 'x' })), 400, 'invalid_request', /bg_image_url is not a valid absolute URL/],
    ['unknown parameter', json({ image_file_b64: b64, sharpen: true }), 400, 'invalid_request', /Unknown parameter sharpen/],
    ['bad size', json({ image_file_b64: b64, size: 'huge' }), 400, 'invalid_request', /Expected one of preview, full, auto for size but received "huge"/],
    ['bad colour', post(form({ image_file: new Blob([tinyPng]), bg_color: 'reddish' })), 400, 'invalid_request', /bg_color/],
    ['bad base64', json({ image_file_b64: '***' }), 400, 'invalid_request', /not valid base64/],
    ['invalid JSON', post('{"image_url":', { 'Content-Type': 'application/json' }), 400, 'invalid_request', /not valid JSON/],
    ['other content type', post('raw', { 'Content-Type': 'image/png' }), 400, 'invalid_request', /multipart\/form-data or application\/json/],
    ['not an image', json({ image_file_b64: Buffer.from('hello world, not an image').toString('base64') }), 400, 'unsupported_format', /./],
    ['blocked image_url', json({ image_url: 'http://2130706433/a.png' }), 400, 'invalid_request', /not a public address/],
    ['image_url scheme', json({ image_url: 'file:///etc/passwd' }), 400, 'invalid_request', /http or https/],
  ];
  for (const [name, request, status, code, message] of expectations) {
    const e = await errorCode(await request);
    t.same([e.status, e.code], [status, code], name);
    t.match(e.message, message, name);
  }

  // 26 MB upload: refused as image_too_large while streaming, and the server stays up.
  const big = Buffer.alloc(26 * 1024 * 1024, 7);
  const tooBig = await errorCode(await post(form({ image_file: new Blob([big]) })));
  t.same([tooBig.status, tooBig.code], [400, 'image_too_large']);
  const bigJson = await errorCode(await json({ image_file_b64: Buffer.alloc(26 * 1024 * 1024).toString('base64') }));
  t.same([bigJson.status, bigJson.code], [400, 'image_too_large']);
  t.equal((await fetch(`${srv.url}/api/v1/health`)).status, 200);
});

t.test('results: UUID v4 ids only (422 detail), unknown ids are 404 not_found', async (t) => {
  const srv = await startApi(t);
  for (const bad of ['abc', '6f1c3b1e-1d2a-1c3b-9a8b-1234567890ab', '../../cutout.db']) {
    const res = await fetch(`${srv.url}/api/v1/results/${encodeURIComponent(bad)}`);
    t.equal(res.status, 422, bad);
    const body = (await res.json()) as any;
    t.match(body.detail, [{ loc: ['path', 'job_id'], msg: String, type: 'uuid_parsing' }]);
    t.equal(body.error.code, 'invalid_request');
  }
  const unknown = await errorCode(await fetch(`${srv.url}/api/v1/results/${crypto.randomUUID()}`));
  t.same([unknown.status, unknown.code], [404, 'not_found']);
});

t.test('insufficient_credits at balance 0 for full (and auto <= 4 MP) before any work', async (t) => {
  const srv = await startApi(t);
  const k = await createKey(srv.dataDir);
  const store = await openStore(srv.dataDir);
  for (let i = 0; i < 10; i++) await store.ledger.recordRun({ id: crypto.randomUUID(), accountId: k.account, keyId: k.id, channel: 'api', input: 'x', size: 'full', credits: 1, ms: 1 });
  await store.close();
  for (const size of ['full', 'auto']) {
    const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(k.key), body: form({ image_file: new Blob([tinyPng]), size }) });
    const e = await errorCode(res);
    t.same([e.status, e.code], [402, 'insufficient_credits'], size);
    t.match(e.message, /cutout credits add ACCOUNT_OR_KEY_ID AMOUNT/, 'the 402 says how credits are added (issue 51)');
    t.ok(res.headers.get('x-ratelimit-remaining'), 'rate-limit headers on the 402');
  }
});

t.test('marketplace headers count only with the right secret', async (t) => {
  const secret = 'proxy-secret-' + crypto.randomBytes(8).toString('hex');
  const withSecret = await startApi(t, [], { env: { CUTOUT_MARKETPLACE_SECRET: secret } });
  const as = (headers: Record<string, string>) => fetch(`${withSecret.url}/api/v1/account`, { headers });
  const first = await as({ 'X-Marketplace-Proxy-Secret': secret, 'X-Marketplace-User': 'alice' });
  t.equal(first.status, 200);
  const alice = (await first.json()) as any;
  t.match(alice, { account_id: /^acct_/, plan: 'marketplace', balance: 0, test: false });
  t.equal(first.headers.get('x-ratelimit-limit'), '60');
  const again = (await (await as({ 'X-Marketplace-Proxy-Secret': secret, 'X-Marketplace-User': 'alice' })).json()) as any;
  t.equal(again.account_id, alice.account_id, 'one account per marketplace user');
  const bob = (await (await as({ 'X-Marketplace-Proxy-Secret': secret, 'X-Marketplace-User': 'bob' })).json()) as any;
  t.not(bob.account_id, alice.account_id);
  const wrong = await errorCode(await as({ 'X-Marketplace-Proxy-Secret': secret + 'x', 'X-Marketplace-User': 'alice' }));
  t.same([wrong.status, wrong.code], [401, 'invalid_api_key'], 'a wrong secret is ignored, and there is no key');
  const noUser = await errorCode(await as({ 'X-Marketplace-Proxy-Secret': secret }));
  t.same([noUser.status, noUser.code], [401, 'invalid_api_key']);

  const without = await startApi(t);
  const ignored = await errorCode(await fetch(`${without.url}/api/v1/account`, { headers: { 'X-Marketplace-Proxy-Secret': '', 'X-Marketplace-User': 'alice' } }));
  t.same([ignored.status, ignored.code], [401, 'invalid_api_key'], 'without CUTOUT_MARKETPLACE_SECRET the headers are ignored');
});

