/**
 * The account page's server side (issue 56): GET /account and its assets under the playground's
 * CSP, turned off with the playground (--no-playground), and GET /api/v1/removals, the recent
 * removals it lists: the caller's account only, newest first, each with its result's confidence,
 * no result id, `limit` checked. The page itself is driven in Chromium by
 * test/e2e/account-page.test.ts.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { bearer, createKey, errorCode, startApi, upload } from './helpers/api-server.js';
import { FIXTURES } from './helpers/cli.js';
import { PLAYGROUND_CSP } from '../src/server/routes-playground.js';

const chelsea = fs.readFileSync(path.join(FIXTURES, 'chelsea.jpg'));

t.test('GET /account and its assets: served by cutout under the playground\'s CSP', async (t) => {
  const srv = await startApi(t);
  for (const [p, type] of [['/account', /^text\/html/], ['/account/app.js', /^text\/javascript/], ['/account/app.css', /^text\/css/]] as const) {
    const res = await fetch(`${srv.url}${p}`);
    t.equal(res.status, 200, `${p}: 200`);
    t.match(res.headers.get('content-type'), type);
    t.equal(res.headers.get('content-security-policy'), PLAYGROUND_CSP, `${p}: the playground's CSP`);
    const body = await res.text();
    t.notMatch(body, /https?:\/\/(?!www\.w3\.org\/2000\/svg)/, `${p}: nothing from another origin`);
  }
  const html = await (await fetch(`${srv.url}/account`)).text();
  t.notMatch(html, /<script>|<style>|style="/, 'no inline script or style');
  t.match(html, /href="\.\/"[^>]*>Open the playground/, 'a link to the playground');
});

t.test('--no-playground turns the account page off too', async (t) => {
  const srv = await startApi(t, ['--no-playground']);
  for (const p of ['/account', '/account/app.js']) {
    const res = await fetch(`${srv.url}${p}`);
    t.equal(res.status, 404, `${p}: 404`);
    t.match((await errorCode(res)).message, /--no-playground/);
  }
});

t.test('GET /api/v1/removals: the account\'s recent removals with their confidence', async (t) => {
  const srv = await startApi(t);
  const mine = await createKey(srv.dataDir);
  const other = await createKey(srv.dataDir);
  t.equal((await fetch(`${srv.url}/api/v1/removals`)).status, 401, 'a key is needed');
  const empty = await fetch(`${srv.url}/api/v1/removals`, { headers: bearer(mine.key) });
  t.same(await empty.json(), { removals: [] }, 'none yet');

  const ids: string[] = [];
  for (const size of ['full', 'preview']) {
    const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(mine.key), body: upload(chelsea, { size }) });
    t.equal(res.status, 200, `a ${size} removal`);
    ids.push(res.headers.get('x-job-id') ?? '');
    await res.arrayBuffer();
  }
  const res = await fetch(`${srv.url}/api/v1/removals`, { headers: bearer(mine.key) });
  t.equal(res.status, 200);
  const text = await res.text();
  const { removals } = JSON.parse(text) as { removals: any[] };
  t.equal(removals.length, 2, 'both removals');
  t.same(removals.map((r) => r.size), ['preview', 'full'], 'newest first');
  t.same(removals.map((r) => r.credits), [0, 1], 'what each cost');
  for (const r of removals) {
    t.match(r, { channel: 'api', input: 'upload', ms: Number });
    t.ok(typeof r.confidence === 'number' && r.confidence >= 0 && r.confidence <= 1, `confidence ${r.confidence}`);
    t.ok(!Number.isNaN(Date.parse(r.created_at)), 'an ISO time');
    t.same(Object.keys(r).sort(), ['channel', 'confidence', 'created_at', 'credits', 'input', 'ms', 'size'], 'no id of the run or its result');
  }
  for (const id of ids.filter(Boolean)) t.notOk(text.includes(id), 'the result ids (capability URLs) are not listed');

  const one = (await (await fetch(`${srv.url}/api/v1/removals?limit=1`, { headers: bearer(mine.key) })).json()) as { removals: any[] };
  t.equal(one.removals.length, 1, 'limit=1');
  for (const bad of ['0', '101', 'ten', '1.5']) {
    const refused = await fetch(`${srv.url}/api/v1/removals?limit=${bad}`, { headers: bearer(mine.key) });
    const err = await errorCode(refused);
    t.equal(err.status, 400, `limit=${bad}: 400`);
    t.match(err.message, /limit/);
  }
  const theirs = (await (await fetch(`${srv.url}/api/v1/removals`, { headers: bearer(other.key) })).json()) as { removals: any[] };
  t.same(theirs.removals, [], 'another account sees none of them');
});
