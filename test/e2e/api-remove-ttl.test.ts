/**
 * Results expire after --result-ttl and an internal failure is processing_failed with its cause
 * on the server's stderr (moved from api-remove.test.ts, whose other tests run in process): a real
 * `cutout serve` child, whose stderr the test reads.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import { balanceOf, bearer, createKey, errorCode, startServe, upload } from '../helpers/api-server.js';

const chelsea = await fs.readFile(new URL('../fixtures/chelsea.jpg', import.meta.url));

t.test('results expire after --result-ttl and the purge deletes them; an internal failure is processing_failed', async (t) => {
  const srv = await startServe(t, ['--result-ttl', '2']);
  const { key } = await createKey(srv.dataDir);
  const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(chelsea) });
  t.equal(res.status, 200);
  const id = res.headers.get('x-job-id')!;
  // Under `npm run test:s3-results` the results are objects (results-s3.test.ts checks their purge):
  // the steps about the data directory's files are for the default layout only.
  const filesHere = process.env.CUTOUT_TEST_RESULTS !== 's3';
  const file = path.join(srv.dataDir, 'results', `${id}.png`);
  if (filesHere) await fs.stat(file);
  await new Promise((r) => setTimeout(r, 3500));
  const gone = await errorCode(await fetch(`${srv.url}/api/v1/results/${id}`));
  t.same([gone.status, gone.code], [404, 'not_found']);
  if (!filesHere) return;
  await t.rejects(fs.stat(file), { code: 'ENOENT' }, 'the purge deleted the file');

  // The results directory replaced by a file: storing fails inside the server.
  await fs.rm(path.join(srv.dataDir, 'results'), { recursive: true, force: true });
  await fs.writeFile(path.join(srv.dataDir, 'results'), 'in the way');
  const broken = await errorCode(await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(chelsea, { size: 'full' }) }));
  t.same([broken.status, broken.code], [500, 'processing_failed']);
  t.notMatch(broken.message, /ENOTDIR|EEXIST|results|\//, 'no internals in the message');
  t.match(srv.stderr(), /unexpected error/, 'the operator sees the cause');
  t.equal(await balanceOf(srv.url, key), 10, 'nothing charged');
  t.equal((await fetch(`${srv.url}/api/v1/health`)).status, 200, 'the server keeps running');
});
