/**
 * What a result says of itself (result-fields.ts, issue 45): one record and one table of where
 * each field goes. A made-up row reaches the --json line, the manifest, the stored columns, a
 * job's record and callback, every dialect's headers and their CORS exposure, remove.bg's JSON
 * body and the OpenAPI document with no other change; the table keeps the names the contracts
 * fix (remove.bg's headers and `data`, api-spec 2.2's metadata); and on a server in this process
 * (the stand-in model) every row reaches every door it names.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { jsonLine } from '../src/commands/progress.js';
import type { ItemReport } from '../src/commands/remove-item.js';
import type { RemoveResult } from '../src/pipeline/types.js';
import { callbackBody } from '../src/queue/callbacks.js';
import {
  DIALECTS, RESULT_FIELDS, dialectBody, manifestFields, parseResultFields, resultFieldsOf, resultHeaderNames, resultHeaders, resultJson,
  storedResultFields, type ResultFieldRow, type ResultFields,
} from '../src/result-fields.js';
import { openapiDocument, resultFieldsOpenapi } from '../src/server/v1/openapi.js';
import { jobRecord } from '../src/server/v1/routes-jobs.js';
import type { JobRow } from '../src/store/db.js';
import { bearer, createKey, startApi, upload } from './helpers/api-server.js';
import { startReceiver } from './helpers/callback-receiver.js';
import { FIXTURES } from './helpers/cli.js';

/** A pipeline result as the doors see it (only what the rows read). */
const result = {
  width: 451, height: 300, foreground: { top: 17, left: 55, width: 341, height: 266 }, confidence: 0.91234, ms: 412, frames: 1,
} as unknown as RemoveResult;

/** A field that does not exist: its row is all it has. */
const sharpness = {
  key: 'sharpness', of: (r: RemoveResult) => r.width / 1000, json: 'sharpness', manifest: 'sharpness_score',
  text: (v: number) => v.toFixed(2),
  headers: { v1: ['X-Cutout-Sharpness'], removebg: ['X-Sharpness'], photoroom: [{ name: 'x-blur', text: (v: number) => (v * 2).toFixed(1) }] },
  body: { removebg: 'sharpness' },
  openapi: { name: 'Sharpness', schema: { type: 'number', minimum: 0, description: 'How sharp the edge is.' } },
} as unknown as ResultFieldRow;

t.test('a made-up row reaches every door with no other change', async (t) => {
  const table = [...RESULT_FIELDS, sharpness];
  const fields = resultFieldsOf(result, table) as ResultFields & { sharpness: number };
  t.equal(fields.sharpness, 0.451, 'the record takes its value from the pipeline result');

  const report: ItemReport = { input: 'cat.jpg', output: 'cat.cutout.png', width: 451, height: 300, ms: 530, error: null, fields };
  t.match(jsonLine(report, table), { input: 'cat.jpg', width: 451, ms: 530, credits_charged: 0, sharpness: 0.451 }, 'the --json line');
  t.equal(manifestFields(fields, table).sharpness_score, 0.451, 'the manifest line, under its manifest key');

  const stored = storedResultFields(fields, table);
  t.same(parseResultFields(stored, table), fields, 'the stored column (results, jobs) reads back whole');
  t.notOk('sharpness' in (parseResultFields(stored) ?? {}), 'a server without the row ignores it (a fleet mid-upgrade)');
  const job = { id: 'j1', status: 'done', creditsCharged: 1, creditsRemaining: 9, resultFields: parseResultFields(stored, table), createdAt: 0, updatedAt: 0 } as unknown as JobRow;
  t.equal(jobRecord({ baseUrl: 'http://x' }, job, table).sharpness, 0.451, 'a done job\'s record');
  const body = JSON.parse(callbackBody({ id: 'j1' }, { status: 'done', url: 'http://x/r', creditsCharged: 1, creditsRemaining: 9, fields }, table));
  t.equal(body.sharpness, 0.451, 'and its callback body');

  t.equal(resultHeaders(fields, 'v1', table)['X-Cutout-Sharpness'], '0.45', 'v1\'s header, in the row\'s text');
  t.equal(resultHeaders(fields, 'removebg', table)['X-Sharpness'], '0.45', 'remove.bg\'s header of its own name');
  t.equal(resultHeaders(fields, 'photoroom', table)['x-blur'], '0.9', 'a header with a text of its own');
  t.notOk(Object.keys(resultHeaders(fields, 'rembg', table)).some((h) => /sharp|blur/i.test(h)), 'a dialect the row does not name sends none');
  t.ok(resultHeaderNames('removebg', table).includes('X-Sharpness'), 'and the dialect lets a page read it (CORS)');
  t.equal(dialectBody(fields, 'removebg', table).sharpness, 0.451, 'remove.bg\'s JSON `data`');

  const doc = resultFieldsOpenapi(table);
  t.same(doc.schemas.Sharpness, sharpness.openapi.schema, 'OpenAPI: its schema');
  t.same(doc.headers['X-Cutout-Sharpness'], { $ref: '#/components/headers/XCutoutSharpness' }, 'v1\'s header on the sync answer');
  t.match(doc.headerComponents.XCutoutSharpness, { schema: { $ref: '#/components/schemas/Sharpness' } });
  t.match(doc.props('When `done`.').sharpness, { $ref: '#/components/schemas/Sharpness' }, 'the property of a job and a callback');
});

t.test('the table keeps the names the contracts fix', async (t) => {
  const fields = resultFieldsOf(result);
  // What a door sends today is pinned (names and text, byte for byte); a new row may add to it,
  // except where a contract fixes the whole shape (remove.bg's `data`, and v1's metadata below).
  t.has(resultJson(fields), {
    width: 451, height: 300, foreground_top: 17, foreground_left: 55, foreground_width: 341, foreground_height: 266, confidence: 0.91234, processing_ms: 412,
  }, 'JSON keys: the CLI\'s width/height, remove.bg\'s foreground_*, confidence, v1\'s processing_ms');
  t.same(manifestFields(fields), resultJson(fields), 'a manifest line uses the same keys');
  t.has(resultHeaders(fields, 'removebg'), {
    'X-Width': '451', 'X-Max-Width': '451', 'X-Height': '300', 'X-Max-Height': '300',
    'X-Foreground-Top': '17', 'X-Foreground-Left': '55', 'X-Foreground-Width': '341', 'X-Foreground-Height': '266',
    'X-Cutout-Confidence': '0.912',
  }, 'remove.bg\'s headers, as it names and writes them (removebg-api.md), and the confidence');
  t.same(Object.keys(dialectBody(fields, 'removebg')), ['foreground_top', 'foreground_left', 'foreground_width', 'foreground_height'], 'remove.bg\'s `data` (S1a): the box and nothing else');
  for (const d of ['v1', 'rembg', 'clipdrop'] as const) t.has(resultHeaders(fields, d), { 'X-Cutout-Confidence': '0.912' }, `${d}: the confidence header`);
  t.has(resultHeaders(fields, 'photoroom'), { 'x-uncertainty-score': '0.088', 'X-Cutout-Confidence': '0.912' }, 'Photoroom: its score (1 - confidence) and cutout\'s');
  t.same(resultHeaders({ confidence: 0.5 }, 'v1'), { 'X-Cutout-Confidence': '0.500' }, 'a record of an older server (confidence only) sends what it has');

  const names = (pick: (r: ResultFieldRow) => string | null | undefined) => RESULT_FIELDS.map(pick).filter(Boolean);
  for (const [what, list] of [['JSON', names((r) => r.json)], ['manifest', names((r) => r.manifest)], ['OpenAPI', names((r) => r.openapi.name)]] as const) {
    t.equal(new Set(list).size, list.length, `${what} names are unique`);
  }
  for (const d of DIALECTS) t.equal(new Set(resultHeaderNames(d)).size, resultHeaderNames(d).length, `${d}: header names are unique`);
  for (const r of RESULT_FIELDS) {
    t.ok(r.openapi.schema.description, `${r.key} is described for the OpenAPI document`);
    t.same(openapiDocument.components.schemas[r.openapi.name], r.openapi.schema, `${r.key}: its schema is the document's (no other component of that name)`);
  }
  t.same(parseResultFields('not json'), null, 'a column that cannot be read says nothing');
  t.same(parseResultFields(JSON.stringify({ confidence: 0.7, unknown: 1 })), { confidence: 0.7 }, 'keys of no row are ignored');
});

t.test('every row reaches every door it names, on a server', async (t) => {
  const cat = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
  const srv = await startApi(t, ['--allow-private-network', '--rate-limit', '1000']);
  const key = await createKey(srv.dataDir);
  const receiver = await startReceiver(t);
  const origin = { Origin: 'https://shop.example' };
  const jsonKeys = RESULT_FIELDS.map((r) => r.json);
  const form = (name: string, fields: Record<string, string> = {}) => {
    const f = new FormData();
    f.append(name, new Blob([cat]), 'cat.jpg');
    for (const [k, v] of Object.entries(fields)) f.append(k, v);
    return f;
  };

  // A job: the record and the callback carry every field, the download its v1 headers.
  const created = await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(key.key, { 'X-Callback-Url': `${receiver.url}/f` }), body: upload(cat, { size: 'full' }) });
  const id = ((await created.json()) as any).job_id as string;
  const [callback] = await receiver.waitFor((r) => r.path === '/f');
  const record = (await (await fetch(`${srv.url}/api/v1/jobs/${id}`, { headers: bearer(key.key) })).json()) as any;
  for (const k of jsonKeys) t.type(record[k], 'number', `job record: ${k}`);
  t.same(Object.fromEntries(jsonKeys.map((k) => [k, callback.json[k]])), Object.fromEntries(jsonKeys.map((k) => [k, record[k]])), 'the callback body carries the same fields');
  t.match(record, { width: 451, height: 300 });
  const fields = parseResultFields(JSON.stringify(record))!;
  const download = await fetch(record.url);
  const image = Buffer.from(await download.arrayBuffer());
  t.same((({ width, height }) => [width, height])(await sharp(image).metadata()), [record.width, record.height], 'the stored size is the image\'s');
  for (const [name, value] of Object.entries(resultHeaders(fields, 'v1'))) t.equal(download.headers.get(name), value, `a stored result's download: ${name}, read back from its row`);

  // v1 sync: its headers from the table; its JSON metadata api-spec 2.2's, exactly.
  const sync = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key, { Accept: 'application/json' }), body: upload(cat, { size: 'full' }) });
  const meta = (await sync.json()) as any;
  t.same(Object.keys(meta), ['id', 'url', 'width', 'height', 'credits_charged', 'credits_remaining', 'processing_ms'], 'v1\'s JSON metadata: api-spec 2.2\'s keys, in its order, and no other');
  for (const name of resultHeaderNames('v1')) t.equal(sync.headers.get(name), resultHeaders(fields, 'v1')[name], `v1 sync: ${name}, the same as the job's`);

  // remove.bg: every header the table names, its `data` exactly remove.bg's, both agreeing.
  const rb = await fetch(`${srv.url}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': key.key, Accept: 'application/json', ...origin }, body: form('image_file', { size: 'full' }) });
  const data = ((await rb.json()) as any).data;
  t.same(Object.keys(data), ['result_b64', ...Object.keys(dialectBody(fields, 'removebg'))], 'remove.bg\'s `data`: the image and the box, no other key');
  t.same(resultHeaders(parseResultFields(JSON.stringify(data))!, 'removebg'), Object.fromEntries(Object.entries(resultHeaders(fields, 'removebg')).filter(([h]) => h.startsWith('X-Foreground'))), 'the box in `data` is the one in the headers');
  const expected = resultHeaders(fields, 'removebg');
  for (const name of resultHeaderNames('removebg')) t.equal(rb.headers.get(name), expected[name], `remove.bg: ${name}`);

  // The other dialects: their headers, and a page on another origin may read them.
  const answers = {
    removebg: rb,
    rembg: await fetch(`${srv.url}/api/remove`, { method: 'POST', headers: { 'X-Api-Key': key.key, ...origin }, body: form('file') }),
    photoroom: await fetch(`${srv.url}/v1/segment`, { method: 'POST', headers: { 'x-api-key': key.key, ...origin }, body: form('image_file') }),
    clipdrop: await fetch(`${srv.url}/remove-background/v1`, { method: 'POST', headers: { 'x-api-key': key.key, ...origin }, body: form('image_file') }),
  };
  for (const [dialect, res] of Object.entries(answers) as [keyof typeof answers, Response][]) {
    t.equal(res.status, 200, `${dialect} answered`);
    if (!res.bodyUsed) await res.arrayBuffer();
    const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(/,\s*/);
    for (const name of resultHeaderNames(dialect)) {
      t.ok(res.headers.get(name), `${dialect}: ${name}`);
      t.ok(exposed.includes(name), `${dialect}: ${name} is exposed to other origins`);
    }
  }
});
