/**
 * Photoroom's and Clipdrop's code samples against a real `cutout serve`, in child processes, with
 * only the key changed: Photoroom's web sample (fetch + FormData, `X-Api-Key`, a Blob back) and
 * its Node sample (the https module, a hand-written multipart body, `X-API-Key`, an image
 * Content-Type required), and Clipdrop's documented fetch sample (with and without `accept`). A
 * preload (fixtures/redirect-https.cjs) points their https hosts at the test server. The samples
 * are written out in test/fixtures/hosted (see each file's head for what it reproduces).
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { balanceOf, createKey, startServe, tempDataDir } from '../helpers/api-server.js';
import { FIXTURES } from '../helpers/cli.js';
import { runRedirected } from '../helpers/hosted-client.js';

const SAMPLES = path.join(FIXTURES, 'hosted');
const catPath = path.join(FIXTURES, 'chelsea.jpg'); // 451x300

const srv = await startServe(t, [], { env: { CUTOUT_QUALITY: 'fast' } });
const key = await createKey(srv.dataDir);
const work = await tempDataDir(t);

const runSample = (args: string[]) => runRedirected(['sdk.photoroom.com', 'image-api.photoroom.com', 'clipdrop-api.co'], srv.url, args);

t.test("Photoroom's web sample: fetch + FormData, a PNG Blob back, 1 credit", async (t) => {
  const out = path.join(work, 'web.png');
  const before = await balanceOf(srv.url, key.key);
  const r = await runSample([path.join(SAMPLES, 'photoroom-web.mjs'), key.key, catPath, out]);
  t.equal(r.code, 0, r.stderr);
  t.same(JSON.parse(r.stdout).type, 'image/png');
  t.match(await sharp(out).metadata(), { format: 'png', width: 451, height: 300, channels: 4 });
  t.equal(await balanceOf(srv.url, key.key), before - 1);
  const bad = await runSample([path.join(SAMPLES, 'photoroom-web.mjs'), 'cut_live_nope', catPath, out]);
  t.not(bad.code, 0, 'a bad key fails the sample');
  t.match(bad.stderr, /"status_code":403/, 'it logs the JSON error body it reads');
});

t.test("Photoroom's Node sample: the https module, a hand-made multipart body", async (t) => {
  const out = path.join(work, 'node.png');
  const r = await runSample([path.join(SAMPLES, 'photoroom-node.cjs'), key.key, catPath, out]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /Image saved to/);
  t.match(await sharp(out).metadata(), { format: 'png', width: 451, height: 300, channels: 4 });
  const bad = await runSample([path.join(SAMPLES, 'photoroom-node.cjs'), 'cut_live_nope', catPath, out]);
  t.equal(bad.code, 1);
  t.match(bad.stderr, /Expected an image response, but received: \{"detail":/);
});

t.test("Clipdrop's documented fetch sample, with and without accept", async (t) => {
  for (const [accept, type, format] of [[undefined, 'image/png', 'png'], ['image/webp', 'image/webp', 'webp'], ['image/jpeg', 'image/jpeg', 'jpeg']] as const) {
    const out = path.join(work, `clipdrop.${format}`);
    const before = await balanceOf(srv.url, key.key);
    const r = await runSample([path.join(SAMPLES, 'clipdrop-docs.mjs'), key.key, catPath, out, ...(accept ? [accept] : [])]);
    t.equal(r.code, 0, r.stderr);
    const said = JSON.parse(r.stdout);
    t.same(said, { type, remaining: String(before - 1), consumed: '1' }, `accept ${accept ?? '(none)'}`);
    t.match(await sharp(out).metadata(), { format, width: 451, height: 300 });
    t.equal(await balanceOf(srv.url, key.key), before - 1);
  }
  const bad = await runSample([path.join(SAMPLES, 'clipdrop-docs.mjs'), '', catPath, path.join(work, 'x.png')]);
  t.equal(bad.code, 1);
  t.same(JSON.parse(bad.stderr), { status: 401, body: { error: 'No api key provided' } });
});
