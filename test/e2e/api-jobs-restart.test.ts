/**
 * The queue survives its process: jobs queued and running when the server is killed (SIGKILL)
 * run after a restart on the same data directory; SIGTERM lets the running job finish and leaves
 * the rest queued; callbacks pending at a stop are delivered by the next start. In the end every
 * job is done, each full-size job charged exactly once, every callback delivered and signed with
 * the same generated secret. Five real inferences (one of them cut short by the kill).
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import { RESULT_FIELDS } from '../../src/result-fields.js';
import { openStore } from '../../src/store/db.js';
import { bearer, createKey, jobInputsOf, startServe, tempDataDir } from '../helpers/api-server.js';
import { signatureValid, startReceiver } from '../helpers/callback-receiver.js';
import { FIXTURES } from '../helpers/cli.js';
import { until } from '../helpers/process.js';

const chelsea = await fs.readFile(path.join(FIXTURES, 'chelsea.jpg'));
const coffee = await fs.readFile(path.join(FIXTURES, 'coffee.jpg'));
const astronaut = await fs.readFile(path.join(FIXTURES, 'astronaut.jpg'));

async function status(url: string, key: string, id: string): Promise<any> {
  const res = await fetch(`${url}/api/v1/jobs/${id}`, { headers: bearer(key) });
  if (res.status !== 200) throw new Error(`GET job ${id}: ${res.status} ${await res.text()}`);
  return res.json();
}


async function storeView(dataDir: string, ids: string[]) {
  const store = await openStore(dataDir);
  try {
    const jobs = await Promise.all(ids.map((id) => store.jobs.getById(id)));
    const deliveries = await Promise.all(ids.map((id) => store.deliveries.of(id)));
    const charges = await store.db.all<{ ref: string; n: number }>("SELECT ref, COUNT(*) AS n FROM ledger WHERE reason = 'charge' GROUP BY ref");
    const runs = await store.db.all<{ id: string; channel: string }>('SELECT id, channel FROM runs');
    return { jobs: jobs.map((j) => j!), deliveries, charges, runs };
  } finally {
    await store.close();
  }
}

t.test('kill, restart, graceful stop, restart: nothing lost, nothing charged twice, every callback delivered', async (t) => {
  let answer = 200;
  const receiver = await startReceiver(t, () => answer);
  const dataDir = await tempDataDir(t);
  const flags = ['--workers', '1', '--allow-private-network', '--rate-limit', '100000']; // the test polls often
  const k = await createKey(dataDir);

  // Phase 1: a batch of three and one single job; kill -9 while the first one runs.
  let srv = await startServe(t, [...flags, '--callback-backoff', '50'], { dataDir });
  const accepting = srv; // the server that stored the jobs' inputs
  const callback = { 'X-Callback-Url': `${receiver.url}/cb` };
  const batch = await fetch(`${srv.url}/api/v1/jobs/batch`, {
    method: 'POST',
    headers: bearer(k.key, { 'Content-Type': 'application/json', ...callback }),
    body: JSON.stringify({
      size: 'full',
      images: [{ image_file_b64: chelsea.toString('base64') }, { image_file_b64: coffee.toString('base64'), size: 'preview', format: 'webp' }, { image_file_b64: astronaut.toString('base64') }],
    }),
  });
  t.equal(batch.status, 202);
  const form = new FormData();
  form.append('image_file', new Blob([chelsea]), 'cat.jpg');
  const single = await fetch(`${srv.url}/api/v1/jobs`, { method: 'POST', headers: bearer(k.key, callback), body: form });
  t.equal(single.status, 202);
  const ids: string[] = [...((await batch.json()) as any).job_ids, ((await single.json()) as any).job_id];
  await until('the first job to run', async () => (await status(srv.url, k.key, ids[0])).status === 'processing');
  const killed = await srv.stop('SIGKILL');
  t.equal(killed.signal, 'SIGKILL');
  let view = await storeView(dataDir, ids);
  t.same(view.jobs.map((j) => j.status), ['processing', 'queued', 'queued', 'queued'], 'killed mid-job');
  t.equal((await jobInputsOf(accepting)).length, 4, 'every input is stored');
  t.same(view.charges, [], 'nothing charged yet');

  // Phase 2: the receiver is down (503). The restart requeues the interrupted job and runs it;
  // SIGTERM while the second runs lets it finish and leaves the rest queued.
  answer = 503;
  srv = await startServe(t, [...flags, '--callback-backoff', '5000'], { dataDir });
  await until('the first job to be done', async () => (await status(srv.url, k.key, ids[0])).status === 'done');
  await until('the second job to run', async () => (await status(srv.url, k.key, ids[1])).status === 'processing');
  const stopped = await srv.stop('SIGTERM');
  t.equal(stopped.code, 0, `SIGTERM: clean exit in ${stopped.ms} ms`);
  t.ok(stopped.ms < 20_000, 'within the grace period');
  t.match(srv.stderr(), /1 job\(s\) interrupted by the last stop went back to the queue/);
  view = await storeView(dataDir, ids);
  t.same(view.jobs.map((j) => j.status), ['done', 'done', 'queued', 'queued'], 'the running job finished, the rest stayed queued');
  t.equal(view.jobs[0].attempts, 2, 'the killed job ran a second time');
  t.ok(view.deliveries.slice(0, 2).every((d) => d.length === 1 && !d[0].delivered && !d[0].gaveUp), 'their callbacks are pending');
  t.ok(receiver.received.every((r) => r.status === 503), 'no callback got through yet');

  // Phase 3: the receiver is back; everything finishes and every callback arrives.
  answer = 200;
  srv = await startServe(t, [...flags, '--callback-backoff', '50'], { dataDir });
  const records = await until('every job to be done', async () => {
    const all = await Promise.all(ids.map((id) => status(srv.url, k.key, id)));
    return all.every((j) => j.status === 'done') && all;
  });
  t.same(records.map((j: any) => j.credits_charged), [1, 0, 1, 0], 'full-size jobs cost one credit, previews none');
  const balance = ((await (await fetch(`${srv.url}/api/v1/account`, { headers: bearer(k.key) })).json()) as any).balance;
  t.equal(balance, 8, 'charged exactly twice in all');
  const webp = await fetch(records[1].url);
  t.equal(webp.headers.get('content-type'), 'image/webp', 'the per-item format override held across restarts');

  const delivered = await receiver.waitFor((r) => r.status === 200, 4, 30_000);
  await new Promise((r) => setTimeout(r, 500));
  const secret = (await fs.readFile(path.join(dataDir, 'callback-secret'), 'utf8')).trim();
  t.same(delivered.map((r) => r.json.job_id).sort(), [...ids].sort(), 'one delivered callback per job');
  t.equal(receiver.received.filter((r) => r.status === 200).length, 4, 'and no duplicate');
  t.ok(receiver.received.every((r) => signatureValid(r, secret)), 'all signed with the secret kept in the data directory');
  for (const r of delivered) {
    const i = ids.indexOf(r.json.job_id);
    const fields = Object.fromEntries(RESULT_FIELDS.map((f) => [f.json, r.json[f.json]]));
    t.same(r.json, { job_id: ids[i], status: 'done', url: r.json.url, credits_charged: [1, 0, 1, 0][i], credits_remaining: r.json.credits_remaining, ...fields });
    t.ok(Object.values(fields).every((v) => typeof v === 'number'), 'with every result field (result-fields.ts)');
    t.ok(r.json.confidence >= 0 && r.json.confidence <= 1, 'with the cutout\'s confidence');
  }
  await srv.stop('SIGTERM');

  view = await storeView(dataDir, ids);
  t.same(view.charges.map((c) => [c.ref, c.n]).sort(), [[ids[0], 1], [ids[2], 1]].sort(), 'one charge row per full-size job');
  t.same(view.runs.filter((r) => ids.includes(r.id)).map((r) => r.channel), ['job', 'job', 'job', 'job'], 'one run per job');
  t.ok(view.deliveries.every((d) => d.length === 1 && d[0].delivered), 'every delivery recorded as delivered');
  t.same(await jobInputsOf(accepting), [], 'no input left behind');
});
