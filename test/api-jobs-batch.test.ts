/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model;
 * what follows of `cutout serve` and the real model is what `npm run test:s3-results` runs.
 *
 * POST /api/v1/jobs/batch over HTTP: 50 images accepted with their ids in order, 51 refused,
 * an invalid item refuses the whole batch naming it, per-item overrides, credits for the
 * full-size items, JSON only, and not through the marketplace channel. The 50-image batch is
 * checked for acceptance and ids, then the server is killed: at most a couple of real inferences.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../src/store/db.js';
import { bearer, createKey, errorCode, startApi } from './helpers/api-server.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const tiny = (await sharp({ create: { width: 64, height: 64, channels: 3, background: '#3366cc' } }).jpeg().toBuffer()).toString('base64');

t.test('batches', async (t) => {
  const marketplaceSecret = 'mp-' + crypto.randomBytes(8).toString('hex');
  const srv = await startApi(t, ['--workers', '1'], { env: { CUTOUT_MARKETPLACE_SECRET: marketplaceSecret } });
  const k = await createKey(srv.dataDir);
  const batch = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${srv.url}/api/v1/jobs/batch`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...bearer(k.key), ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const queuedJobs = async () => ((await (await fetch(`${srv.url}/api/v1/health`)).json()) as any).queue.jobs;
  const images = (n: number, item: Record<string, unknown> = {}) => Array.from({ length: n }, () => ({ image_file_b64: tiny, ...item }));

  t.test('an item\'s bad option is named in its loc from the error itself (options table)', async (t) => {
    const res = await batch({ images: [{ image_file_b64: tiny, alpha: 'x' }, { image_file_b64: tiny, image_url: 'https://example.com/a.png' }] });
    t.equal(res.status, 422);
    const body = (await res.json()) as any;
    t.same(body.detail.map((d: any) => d.loc), [['body', 'images', 0, 'alpha'], ['body', 'images', 1, 'image_url']]);
    t.match(body.detail[0].msg, /for alpha/);
  });

  t.test('refusals create nothing', async (t) => {
    const tooMany = await errorCode(await batch({ images: images(51), size: 'preview' }));
    t.same([tooMany.status, tooMany.code], [400, 'invalid_request'], '51 images');
    t.match(tooMany.message, /at most 50 images; received 51/);

    const invalid = await batch({
      size: 'preview',
      images: [{ image_file_b64: tiny }, { image_file_b64: tiny, size: 'huge' }, { image_url: 'file:///etc/passwd' }, { image_file_b64: tiny }, 'oops', { image_file_b64: tiny, foo: 1 }, {}],
    });
    t.equal(invalid.status, 422, 'an invalid item refuses the whole batch');
    const body = (await invalid.json()) as any;
    t.equal(body.error.code, 'invalid_request');
    t.match(body.error.message, /^images\[1\]: Expected one of preview, full, auto for size but received "huge" \(5 invalid items in all; see detail\)\. Nothing was queued\.$/);
    t.same(body.detail.map((d: any) => d.loc), [
      ['body', 'images', 1, 'size'],
      ['body', 'images', 2, 'image_url'],
      ['body', 'images', 4],
      ['body', 'images', 5, 'foo'],
      ['body', 'images', 6],
    ], 'each loc ends in the field at fault, or the item');
    t.match(body.detail, [
      { msg: /size/, type: 'invalid_request' },
      { msg: /http or https/ },
      { msg: /must be an object/ },
      { msg: /Unknown parameter foo/ },
      { msg: /^Give exactly one image source: image_url or image_file_b64\.$/ },
    ]);

    const cases: [string, Promise<Response>, number, string, RegExp][] = [
      ['no images', batch({ size: 'preview' }), 400, 'invalid_request', /images must be an array/],
      ['empty', batch({ images: [] }), 400, 'invalid_request', /images is empty/],
      ['top-level source', batch({ image_file_b64: tiny }), 400, 'invalid_request', /belongs inside an item of images/],
      ['bad top-level option', batch({ images: images(2), format: 'tiff' }), 400, 'invalid_request', /format/],
      ['unknown field', batch({ images: images(1), sharpen: true }), 400, 'invalid_request', /Unknown batch field sharpen/],
      ['unknown item field', batch({ images: [{ image_file_b64: tiny, foo: 1 }] }), 422, 'invalid_request', /^images\[0\]: Unknown parameter foo\. Nothing was queued\.$/],
      ['file upload in an item', batch({ images: [{ image_file: tiny }] }), 422, 'invalid_request', /images\[0\]: A JSON batch cannot carry file uploads/],
      ['not JSON', fetch(`${srv.url}/api/v1/jobs/batch`, { method: 'POST', headers: bearer(k.key), body: (() => { const f = new FormData(); f.append('image_file_b64', tiny); return f; })() }), 400, 'invalid_request', /JSON body only/],
      ['marketplace', fetch(`${srv.url}/api/v1/jobs/batch`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Marketplace-Proxy-Secret': marketplaceSecret, 'X-Marketplace-User': 'alice' },
        body: JSON.stringify({ images: images(1) }),
      }), 400, 'invalid_request', /not offered through the marketplace channel/],
      ['blocked callback', batch({ images: images(1) }, { 'X-Callback-Url': 'http://127.0.0.1:9/hook' }), 400, 'invalid_request', /X-Callback-Url host 127\.0\.0\.1 is not a public address/],
      ['11 full-size images at balance 10', batch({ images: images(11), size: 'full' }), 402, 'insufficient_credits', /11 full-size results but the balance is 10 credits; nothing was queued\. Previews are free\. To add credits, the server's operator runs `cutout credits add/],
    ];
    for (const [name, request, status, code, message] of cases) {
      const e = await errorCode(await request);
      t.same([e.status, e.code], [status, code], name);
      t.match(e.message, message, name);
    }
    t.same(await queuedJobs(), { queued: 0, processing: 0 }, 'no job was created by any of them');
    t.same(await fs.readdir(path.join(srv.dataDir, 'jobs')).catch(() => []), [], 'and no input file');
    t.equal(await (async () => ((await (await fetch(`${srv.url}/api/v1/account`, { headers: bearer(k.key) })).json()) as any).balance)(), 10);
  });

  t.test('top-level options with per-item overrides, one job per image', async (t) => {
    // Queue-only check: the options each job will run with are read back from the store.
    const res = await batch({
      size: 'preview', format: 'webp', bg_color: '#ffffff',
      images: [{ image_file_b64: tiny }, { image_file_b64: tiny, format: 'png', bg_color: 'transparent' }, { image_file_b64: tiny, crop: true, size: 'full' }],
    });
    t.equal(res.status, 202);
    const body = (await res.json()) as any;
    t.equal(body.job_ids.length, 3);
    const store = await openStore(srv.dataDir);
    const jobs = await Promise.all(body.job_ids.map((id: string) => store.jobs.getById(id)));
    await store.close();
    t.same(jobs.map((j) => j!.options), [
      { size: 'preview', format: 'webp', bgColor: { r: 255, g: 255, b: 255 }, crop: false },
      { size: 'preview', format: 'png', bgColor: null, crop: false },
      { size: 'full', format: 'webp', bgColor: { r: 255, g: 255, b: 255 }, crop: true },
    ]);
    t.ok(jobs.every((j) => j!.batchId === jobs[0]!.batchId && j!.batchId !== null), 'one batch id');
  });

  t.test('50 images: accepted, 50 ids in order, each job visible to its owner', async (t) => {
    const started = Date.now();
    const res = await batch({ images: images(50), size: 'preview' });
    t.equal(res.status, 202, `answered in ${Date.now() - started} ms`);
    const body = (await res.json()) as any;
    t.same(Object.keys(body).sort(), ['job_ids', 'jobs']);
    t.equal(body.job_ids.length, 50);
    t.ok(body.job_ids.every((id: string) => UUID_V4.test(id)));
    t.equal(new Set(body.job_ids).size, 50, 'distinct ids');
    t.same(body.jobs, body.job_ids.map((id: string) => ({ job_id: id, status: 'queued' })));
    // The rate limit (60 a minute) allows a few GETs: the first and the last; the store shows all 50.
    const first = (await (await fetch(`${srv.url}/api/v1/jobs/${body.job_ids[0]}`, { headers: bearer(k.key) })).json()) as any;
    const last = (await (await fetch(`${srv.url}/api/v1/jobs/${body.job_ids[49]}`, { headers: bearer(k.key) })).json()) as any;
    t.match(first, { job_id: body.job_ids[0], status: /^(queued|processing|done)$/ });
    t.match(last, { job_id: body.job_ids[49], status: 'queued' }, 'the last image waits behind the others');
    const store = await openStore(srv.dataDir);
    const rows = await Promise.all(body.job_ids.map((id: string) => store.jobs.getById(id)));
    await store.close();
    t.ok(rows.every((r) => r !== null && r.accountId === k.account), 'every job exists, owned by the caller');
    const created = rows.map((r) => r!.createdAt);
    t.ok(created.every((c) => c === created[0]), 'created in one transaction');
    const other = await createKey(srv.dataDir);
    const foreign = await errorCode(await fetch(`${srv.url}/api/v1/jobs/${body.job_ids[0]}`, { headers: bearer(other.key) }));
    t.same([foreign.status, foreign.code], [404, 'not_found']);
    // 50 real inferences would take minutes: stop here (the restart test runs queued jobs to the end).
    await srv.stop();
  });
});
