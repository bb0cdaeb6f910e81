/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model;
 * what follows of `cutout serve` and the real model is what `npm run test:s3-results` runs.
 *
 * POST /api/v1/jobs and GET /api/v1/jobs/{job_id} over HTTP against the real server, with a real
 * callback receiver on 127.0.0.1: the lifecycle with the real model, a failure without charge,
 * ownership, no 4 MP cap, signed callbacks and their retries, submission errors, and 503 on a full
 * queue with sync requests going first. Five real inferences in all.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../src/store/db.js';
import { RESULT_FIELDS } from '../src/result-fields.js';
import { balanceOf, bearer, createKey, errorCode, jobInputsOf, startApi, upload } from './helpers/api-server.js';
import { signatureValid, startReceiver } from './helpers/callback-receiver.js';
import { FIXTURES } from './helpers/cli.js';

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const notImage = Buffer.from('this is plain text, not an image of any kind');
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function getJob(url: string, key: string, id: string): Promise<any> {
  const res = await fetch(`${url}/api/v1/jobs/${id}`, { headers: bearer(key) });
  if (res.status !== 200) throw new Error(`GET job ${id}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Polls a job until `done` or `failed`; returns the record and every status seen on the way. */
async function waitForJob(url: string, key: string, id: string, timeoutMs = 90_000): Promise<{ job: any; seen: string[] }> {
  const seen: string[] = [];
  const until = Date.now() + timeoutMs;
  for (;;) {
    const job = await getJob(url, key, id);
    if (seen.at(-1) !== job.status) seen.push(job.status);
    if (job.status === 'done' || job.status === 'failed') return { job, seen };
    if (Date.now() > until) throw new Error(`job ${id} still ${job.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function waitForStatus(url: string, key: string, id: string, statuses: string[], timeoutMs = 60_000): Promise<any> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const job = await getJob(url, key, id);
    if (statuses.includes(job.status)) return job;
    if (Date.now() > until) throw new Error(`job ${id} still ${job.status}, waited for ${statuses.join('|')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('jobs: lifecycle, failure, ownership, signed callbacks and retries', async (t) => {
  const receiver = await startReceiver(t, (p, n) => (p === '/flaky' ? (n <= 2 ? 500 : 200) : p === '/down' ? 500 : 200));
  const srv = await startApi(t, ['--workers', '1', '--allow-private-network', '--callback-backoff', '50', '--rate-limit', '100000']);
  const secretFile = path.join(srv.dataDir, 'callback-secret');
  const secret = (await fs.readFile(secretFile, 'utf8')).trim();
  t.match(secret, /^[0-9a-f]{64}$/, 'a secret was generated in the data directory');
  t.equal((await fs.stat(secretFile)).mode & 0o777, 0o600, 'readable by the owner only');
  const owner = await createKey(srv.dataDir);
  const stranger = await createKey(srv.dataDir);
  const submit = (body: FormData | string, headers: Record<string, string> = {}, key = owner.key) =>
    fetch(`${srv.url}/api/v1/jobs`, {
      method: 'POST',
      headers: bearer(key, typeof body === 'string' ? { 'Content-Type': 'application/json', ...headers } : headers),
      body,
    });

  t.test('queued -> processing -> done: downloadable, charged once, one signed callback', async (t) => {
    const res = await submit(upload(chelsea, { size: 'full' }), { 'X-Callback-Url': `${receiver.url}/done` });
    t.equal(res.status, 202);
    const created = (await res.json()) as any;
    t.same(Object.keys(created).sort(), ['job_id', 'status']);
    t.equal(created.status, 'queued');
    t.match(created.job_id, UUID_V4);
    const id = created.job_id as string;
    t.equal(res.headers.get('location'), `${srv.url}/api/v1/jobs/${id}`);
    t.ok(res.headers.get('x-ratelimit-limit'), 'rate-limit headers on the 202');
    const early = await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(owner.key) });
    const earlyStatus = ((await early.json()) as any).status;
    t.equal(early.headers.get('retry-after'), earlyStatus === 'done' ? null : '2', `a ${earlyStatus} job says when to poll again`);

    const { job, seen } = await waitForJob(srv.url, owner.key, id);
    t.ok(seen[0] === 'queued' || seen[0] === 'processing', `statuses seen: ${seen.join(' -> ')}`);
    const fieldKeys = RESULT_FIELDS.map((r) => r.json);
    t.same(Object.keys(job).sort(), ['created_at', 'credits_charged', 'credits_remaining', 'job_id', 'status', 'updated_at', 'url', ...fieldKeys].sort(), 'api-spec 2.3, and the result\'s fields (result-fields.ts)');
    t.ok(job.confidence >= 0 && job.confidence <= 1, `the cutout's confidence (cli-contract), ${job.confidence}`);
    t.match(job, { width: 451, height: 300, processing_ms: Number }, 'its size and the time the removal took');
    t.ok(job.foreground_left + job.foreground_width <= 451 && job.foreground_top + job.foreground_height <= 300 && job.foreground_width > 0, 'the subject\'s box lies in the result');
    t.match(job, { job_id: id, status: 'done', url: `${srv.url}/api/v1/results/${id}`, credits_charged: 1, credits_remaining: 9 });
    t.ok(Date.parse(job.updated_at) >= Date.parse(job.created_at));

    const download = await fetch(job.url);
    t.equal(download.status, 200, 'the result downloads without auth');
    t.equal(download.headers.get('content-type'), 'image/png');
    const meta = await sharp(Buffer.from(await download.arrayBuffer())).metadata();
    t.same([meta.width, meta.height, meta.hasAlpha], [451, 300, true], 'full size, with alpha');
    t.equal(await balanceOf(srv.url, owner.key), 9, 'charged once');

    const [callback] = await receiver.waitFor((r) => r.path === '/done');
    t.equal(callback.headers['content-type'], 'application/json');
    t.ok(signatureValid(callback, secret), 'X-Service-Signature is the HMAC-SHA256 of the raw body');
    t.notOk(signatureValid(callback, 'another secret'), 'and not of another key');
    t.same(callback.json, { job_id: id, status: 'done', url: job.url, credits_charged: 1, credits_remaining: 9, ...Object.fromEntries(fieldKeys.map((k) => [k, job[k]])) }, 'api-spec 2.7, and the same fields as the record');
    await new Promise((r) => setTimeout(r, 300));
    t.equal(receiver.received.filter((r) => r.path === '/done').length, 1, 'delivered once');
    t.same(await getJob(srv.url, owner.key, id), job, 'the record stays as it was');
    const final = await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(owner.key) });
    t.equal(final.headers.get('retry-after'), null, 'a done job: no Retry-After');
    await final.arrayBuffer();
    t.equal(await balanceOf(srv.url, owner.key), 9, 'never charged again');

    // Ownership: another account's key cannot tell this job from one that does not exist.
    const foreign = await errorCode(await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(stranger.key) }));
    const unknown = await errorCode(await fetch(`${srv.url}/api/v1/jobs/${crypto.randomUUID()}`, { headers: bearer(stranger.key) }));
    t.same([foreign.status, foreign.code], [404, 'not_found'], "another account's key gets 404");
    t.same([unknown.status, unknown.code], [404, 'not_found']);
    t.equal(foreign.message.replace(id, 'ID'), unknown.message.replace(/[0-9a-f-]{36}/, 'ID'), 'the same answer as an unknown id');
    const malformed = await fetch(`${srv.url}/api/v1/jobs/not-a-uuid`, { headers: bearer(owner.key) });
    t.equal(malformed.status, 422);
    t.match(await malformed.json(), { error: { code: 'invalid_request' }, detail: [{ loc: ['path', 'job_id'], type: 'uuid_parsing' }] });
    const anonymous = await errorCode(await fetch(`${srv.url}/api/v1/jobs/${id}`));
    t.same([anonymous.status, anonymous.code], [401, 'invalid_api_key']);
  });

  t.test('no 4 MP cap at size=full: a 4.2 MP image that /remove refuses runs as a job', async (t) => {
    const large = await sharp({ create: { width: 2100, height: 2000, channels: 3, background: '#808080' } })
      .composite([{ input: await sharp(chelsea).resize(900, 600).toBuffer(), left: 600, top: 700 }]).jpeg().toBuffer();
    const sync = await errorCode(await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(owner.key), body: upload(large, { size: 'full' }) }));
    t.same([sync.status, sync.code], [400, 'invalid_request'], '/remove refuses it');
    const res = await submit(JSON.stringify({ image_file_b64: large.toString('base64'), size: 'full', format: 'webp' }));
    t.equal(res.status, 202);
    const { job } = await waitForJob(srv.url, owner.key, ((await res.json()) as any).job_id);
    t.match(job, { status: 'done', credits_charged: 1, credits_remaining: 8 });
    const meta = await sharp(Buffer.from(await (await fetch(job.url)).arrayBuffer())).metadata();
    t.same([meta.format, meta.width, meta.height], ['webp', 2100, 2000], 'native resolution');
  });

  t.test('a job that fails is never charged and carries its error, in the record and the callback', async (t) => {
    const res = await submit(JSON.stringify({ image_file_b64: notImage.toString('base64'), size: 'full' }), { 'X-Callback-Url': `${receiver.url}/failed` });
    t.equal(res.status, 202, 'accepted: the bytes are looked at when the job runs');
    const id = ((await res.json()) as any).job_id;
    const { job } = await waitForJob(srv.url, owner.key, id);
    t.same(Object.keys(job).sort(), ['created_at', 'error', 'job_id', 'status', 'updated_at']);
    t.match(job, { status: 'failed', error: { code: 'unsupported_format', message: /JPEG/ } });
    t.same(Object.keys(job.error).sort(), ['code', 'message']);
    t.equal(await balanceOf(srv.url, owner.key), 8, 'balance unchanged');
    const [callback] = await receiver.waitFor((r) => r.path === '/failed');
    t.ok(signatureValid(callback, secret));
    t.same(callback.json, { job_id: id, status: 'failed', error: job.error });
    const input = await jobInputsOf(srv);
    t.same(input, [], 'finished jobs leave no input file behind');
  });

  t.test('callbacks: one try and 3 retries with exponential backoff on 5xx', async (t) => {
    const post = (p: string) => submit(JSON.stringify({ image_file_b64: notImage.toString('base64') }), { 'X-Callback-Url': `${receiver.url}${p}` });
    const [flaky, down] = await Promise.all([post('/flaky'), post('/down')]);
    const flakyId = ((await flaky.json()) as any).job_id;
    const downId = ((await down.json()) as any).job_id;
    const flakyHits = await receiver.waitFor((r) => r.path === '/flaky', 3);
    const downHits = await receiver.waitFor((r) => r.path === '/down', 4);
    await new Promise((r) => setTimeout(r, 1000)); // long after a 4th retry would have come (50+100+200+400 ms)
    t.equal(receiver.received.filter((r) => r.path === '/flaky').length, 3, '500, 500, 200: exactly 3 attempts');
    t.equal(receiver.received.filter((r) => r.path === '/down').length, 4, 'always 500: exactly 4 attempts, then it gives up');
    t.same(flakyHits.map((h) => h.json.job_id), [flakyId, flakyId, flakyId]);
    t.ok(downHits.every((h) => h.json.job_id === downId && h.raw.equals(downHits[0].raw) && signatureValid(h, secret)), 'the same signed body every time');
    const gaps = downHits.slice(1).map((h, i) => h.at - downHits[i].at);
    t.ok(gaps[0] >= 45 && gaps[1] >= 95 && gaps[2] >= 195, `delays double from --callback-backoff 50: ${gaps.join(', ')} ms`);
    const store = await openStore(srv.dataDir);
    t.match(await store.deliveries.of(downId), [{ attempts: 4, delivered: false, gaveUp: true, lastError: /HTTP 500/ }]);
    t.match(await store.deliveries.of(flakyId), [{ attempts: 3, delivered: true }]);
    await store.close();
  });

  t.test('submission errors are answered at once and create nothing', async (t) => {
    const b64 = JSON.stringify({ image_file_b64: chelsea.toString('base64') });
    const cases: [string, Promise<Response>, number, string, RegExp][] = [
      ['callback scheme', submit(b64, { 'X-Callback-Url': 'ftp://example.com/hook' }), 400, 'invalid_request', /X-Callback-Url must use http or https/],
      ['callback not a URL', submit(b64, { 'X-Callback-Url': 'hook' }), 400, 'invalid_request', /X-Callback-Url is not a valid absolute URL/],
      ['callback credentials', submit(b64, { 'X-Callback-Url': 'http://u:p@127.0.0.1/x' }), 400, 'invalid_request', /credentials/],
      ['bad size', submit(JSON.stringify({ image_file_b64: chelsea.toString('base64'), size: 'huge' })), 400, 'invalid_request', /size/],
      ['two sources', submit(JSON.stringify({ image_file_b64: 'aGk=', image_url: 'http://127.0.0.1/x.jpg' })), 400, 'invalid_request', /exactly one image source/],
      ['no key', fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', body: b64 }), 401, 'invalid_api_key', /./],
    ];
    for (const [name, request, status, code, message] of cases) {
      const e = await errorCode(await request);
      t.same([e.status, e.code], [status, code], name);
      t.match(e.message, message, name);
    }
    // A full-size job at balance 0 is refused at submission, like /remove; previews still queue.
    const poor = await createKey(srv.dataDir);
    const store = await openStore(srv.dataDir);
    for (let i = 0; i < 10; i++) await store.ledger.recordRun({ id: crypto.randomUUID(), accountId: poor.account, keyId: poor.id, channel: 'api', input: 'x', size: 'full', credits: 1, ms: 1 });
    await store.close();
    const refused = await errorCode(await submit(JSON.stringify({ image_file_b64: chelsea.toString('base64'), size: 'full' }), {}, poor.key));
    t.same([refused.status, refused.code], [402, 'insufficient_credits']);
    const preview = await submit(JSON.stringify({ image_file_b64: notImage.toString('base64') }), {}, poor.key);
    t.equal(preview.status, 202, 'a preview job is accepted at balance 0');
    await waitForJob(srv.url, poor.key, ((await preview.json()) as any).job_id);
    const health = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
    t.match(health.queue, { queued: 0, processing: 0, jobs: { queued: 0, processing: 0 } });
  });
});

t.test('a full queue answers 503 gpu_unavailable with Retry-After at once; sync requests go first', async (t) => {
  const srv = await startApi(t, ['--workers', '1', '--queue-limit', '1', '--rate-limit', '100000'], { modelMs: 1500 });
  const { key } = await createKey(srv.dataDir);
  const submit = () => fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key), body: upload(chelsea) });

  const a = ((await (await submit()).json()) as any).job_id;
  await waitForStatus(srv.url, key, a, ['processing']);
  const second = await submit();
  t.equal(second.status, 202, 'one job may wait');
  const b = ((await second.json()) as any).job_id;
  const health = (await (await fetch(`${srv.url}/api/v1/health`)).json()) as any;
  t.match(health.queue, { queued: 1, processing: 1, jobs: { queued: 1, processing: 1 } }, 'health counts the jobs of the store');

  for (let i = 0; i < 3; i++) {
    const started = Date.now();
    const res = await submit();
    const ms = Date.now() - started;
    const e = await errorCode(res);
    t.same([e.status, e.code], [503, 'gpu_unavailable'], `submission ${i + 3}`);
    t.ok(Number(res.headers.get('retry-after')) >= 1, `Retry-After: ${res.headers.get('retry-after')}`);
    t.ok(ms < 1000, `answered in ${ms} ms, without waiting for the queue`);
  }
  const batch = await fetch(`${srv.url}/api/v1/jobs/batch`, {
    method: 'POST', headers: bearer(key, { 'Content-Type': 'application/json' }), body: JSON.stringify({ images: [{ image_file_b64: chelsea.toString('base64') }] }),
  });
  t.equal(batch.status, 503, 'a batch that does not fit is refused whole');
  t.equal((await jobInputsOf(srv)).length, 2, 'input files of the running and the queued job only');

  // A sync request arriving now takes the next free slot before the queued job.
  const sync = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key, { Accept: 'application/json' }), body: upload(chelsea) });
  t.equal(sync.status, 200);
  t.equal((await getJob(srv.url, key, a)).status, 'done', 'the running job finished first');
  t.not((await getJob(srv.url, key, b)).status, 'done', 'the queued job was not run before the sync request');
  const { job } = await waitForJob(srv.url, key, b);
  t.match(job, { status: 'done', credits_charged: 0, credits_remaining: 10 }, 'previews are free');
});
