/**
 * Results in an object store (`--results s3://BUCKET/PREFIX`) against a real S3 API: the store
 * itself over both engines (keys in the rows, no bytes; streams; presigned URLs; batched expiry;
 * a failed charge leaves no object; results stored before --results stay readable). Moved from
 * test/e2e/results-s3.test.ts, which keeps the outages and `cutout serve` with the real model.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { buffer } from 'node:stream/consumers';
import { openStore, type Store, type StoreKind } from '../src/store/db.js';
import { createKey, upload } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';
import { until } from './helpers/process.js';
import { runS3, testS3, TEST_BUCKET } from './helpers/s3.js';
import { ENGINES, storeUrl, tempDir, objectsUnder as objectsUnderIn, openS3Store } from './helpers/stores.js';

// The run's shared s3rver (each store writes under a prefix of its own), else one of this file's.
const s3 = runS3() ?? (await testS3(t));
// This process's own stores reach s3rver through the SDK's standard variables, as a server does.
Object.assign(process.env, s3.env);

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300

const s3Store = (t: Tap.Test, kind: StoreKind, clock: { now: number }) => openS3Store(t, kind, clock, TEST_BUCKET);
const objectsUnder = (prefix: string) => objectsUnderIn(s3, prefix);

function run(accountId: string, id: string, data: Buffer, credits: 0 | 1 = 1) {
  return { id, accountId, keyId: null, channel: 'api' as const, input: 'upload', size: 'full' as const, credits, ms: 5, result: { data, ext: 'png', contentType: 'image/png', width: 4, height: 3 } };
}

for (const kind of ENGINES) {
  t.test(`[${kind}] the store keeps result bytes in the object store and only their keys in its rows`, async (t) => {
    const clock = { now: Date.UTC(2025, 5, 15, 12) };
    const { store, prefix, dir } = await s3Store(t, kind, clock);
    t.equal(store.results.kind, 's3');
    const { account } = await store.keys.create({});
    const id = crypto.randomUUID();
    const bytes = crypto.randomBytes(3 * 1024 * 1024 + 17);
    await store.ledger.recordRun(run(account, id, bytes));

    t.same(await objectsUnder(prefix), [`${prefix}/${id}.png`], 'one object, named by the result');
    const rows = await store.db.all<{ path: string }>('SELECT path FROM results');
    t.same(rows.map((r) => r.path), [`${prefix}/${id}.png`], 'the row holds the key');
    if (kind === 'postgres') {
      const bytesInDb = await store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM results WHERE data IS NOT NULL');
      t.equal(bytesInDb?.n, 0, 'no result bytes in PostgreSQL');
    }
    t.same(await fs.readdir(path.join(dir, 'results')).catch(() => []), [], 'nothing in the data directory');

    const row = await store.results.find(id, 3600);
    t.match(row, { jobId: id, contentType: 'image/png', width: 4, height: 3 });
    const opened = await store.results.open(row!);
    t.equal(opened?.size, bytes.length, 'the length is known before the body');
    t.ok((await buffer(opened!.body)).equals(bytes), 'the streamed bytes are the stored ones');

    const url = await store.results.presign(row!, 3600);
    t.match(url, /X-Amz-Signature=/, 'a SigV4 presigned URL');
    t.match(url, /X-Amz-Expires=3600/, 'valid until the result expires');
    const fetched = await fetch(url!);
    t.equal(fetched.status, 200);
    t.ok(Buffer.from(await fetched.arrayBuffer()).equals(bytes), 'the presigned URL fetches the bytes');
    t.match(await store.results.presign(row!, 30 * 86400), /X-Amz-Expires=604800/, 'never past SigV4\'s 7 days');

    clock.now += 3600 * 1000;
    t.equal(await store.results.find(id, 3600), null, 'expired at the retention even before a purge');
    t.equal(await store.results.purge(3600), 1);
    t.same(await objectsUnder(prefix), [], 'the sweeper deleted the object');
    t.equal((await store.db.all('SELECT 1 FROM results')).length, 0);
  });

  t.test(`[${kind}] purging many results deletes their objects in batches; a failed charge leaves no object`, async (t) => {
    const clock = { now: Date.UTC(2025, 5, 15, 12) };
    const { store, prefix } = await s3Store(t, kind, clock);
    const { account } = await store.keys.create({});
    for (let i = 0; i < 12; i++) await store.ledger.recordRun(run(account, crypto.randomUUID(), Buffer.from([i]), 0));
    t.equal((await objectsUnder(prefix)).length, 12);

    // 10 free credits, all spent: the 11th charge fails after its object was written.
    for (let i = 0; i < 10; i++) await store.ledger.recordRun(run(account, crypto.randomUUID(), Buffer.from([i])));
    const refused = crypto.randomUUID();
    await t.rejects(store.ledger.recordRun(run(account, refused, Buffer.from('unpaid'))), { code: 'insufficient_credits' });
    t.notOk((await objectsUnder(prefix)).includes(`${prefix}/${refused}.png`), 'the object of a run not committed is removed');
    t.equal(await store.results.find(refused, 3600), null);

    clock.now += 7200 * 1000;
    t.equal(await store.results.purge(3600), 22);
    t.same(await objectsUnder(prefix), []);
  });
}

for (const kind of ENGINES) {
  t.test(`[${kind}] results stored before --results was set stay readable until they expire`, async (t) => {
    const clock = { now: Date.UTC(2025, 5, 15, 12) };
    const dir = await tempDir(t);
    const url = await storeUrl(kind);
    const before = await openStore(dir, { url, now: () => clock.now });
    const { account } = await before.keys.create({});
    const old = crypto.randomUUID();
    await before.ledger.recordRun(run(account, old, Buffer.from('kept where it was written')));
    await before.close();

    const prefix = `switch-${kind}`;
    const after = await openStore(dir, { url, results: `s3://${TEST_BUCKET}/${prefix}`, resultsPathStyle: true, now: () => clock.now });
    t.teardown(() => after.close());
    const fresh = crypto.randomUUID();
    await after.ledger.recordRun(run(account, fresh, Buffer.from('in the bucket')));
    t.same((await after.results.get(old, 3600))?.data, Buffer.from('kept where it was written'), 'the older result, from where it was written');
    t.same((await after.results.get(fresh, 3600))?.data, Buffer.from('in the bucket'));
    clock.now += 7200 * 1000;
    t.equal(await after.results.purge(3600), 2, 'both purged at their expiry');
    t.same(await objectsUnder(prefix), []);
    t.same(await fs.readdir(path.join(dir, 'results')).catch(() => []), [], 'the older file too');
  });
}

