/**
 * The door policy's hang-up (server/sync-removal.ts), through a real server with one worker and
 * the real model: a client that hangs up while its full-size removal holds the worker stops that
 * work, on every door (v1's /remove, remove.bg's, rembg's, Photoroom's and Clipdrop's): the slot is freed and nothing is
 * charged or recorded. Were the work finished for nobody, its charge would show in the balance.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { bearer, createKey, startServe } from '../helpers/api-server.js';
import { FIXTURES } from '../helpers/cli.js';
import { sample, scrape } from '../helpers/metrics.js';
import { until } from '../helpers/process.js';

/** About 3.4 MP: under v1's 4 MP sync cap, long enough in the model and the refinement to hang up during it. */
const big = await sharp(path.join(FIXTURES, 'chelsea.jpg')).resize({ width: 2260 }).jpeg().toBuffer();

async function busySlots(url: string): Promise<number> {
  return sample(await scrape(url), 'cutout_inference_slots', { state: 'busy' }) ?? -1;
}

const form = (field: string, extra: Record<string, string> = {}) => {
  const f = new FormData();
  f.append(field, new Blob([big]), 'big.jpg');
  for (const [k, v] of Object.entries(extra)) f.append(k, v);
  return f;
};

t.test('a client that hangs up stops its removal on every door: slot freed, nothing charged', async (t) => {
  const srv = await startServe(t, ['--workers', '1', '--rate-limit', '100000']);
  const doors = [
    { name: 'v1 /remove', path: '/api/v1/remove', headers: (k: string) => bearer(k), body: () => form('image_file', { size: 'full' }) },
    { name: 'remove.bg', path: '/v1.0/removebg', headers: (k: string) => ({ 'X-Api-Key': k }), body: () => form('image_file', { size: 'full' }) },
    { name: 'rembg', path: '/api/remove', headers: (k: string) => ({ 'X-Api-Key': k }), body: () => form('file') },
    { name: 'Photoroom', path: '/v1/segment', headers: (k: string) => ({ 'x-api-key': k }), body: () => form('image_file') },
    { name: 'Clipdrop', path: '/remove-background/v1', headers: (k: string) => ({ 'x-api-key': k }), body: () => form('image_file') },
  ];
  for (const door of doors) {
    const key = await createKey(srv.dataDir);
    const client = new AbortController();
    const sent = fetch(`${srv.url}${door.path}`, { method: 'POST', headers: door.headers(key.key), body: door.body(), signal: client.signal }).catch((err: Error) => err);
    await until(`${door.name}: the removal holds the worker`, async () => (await busySlots(srv.url)) === 1, 60_000);
    client.abort();
    t.match(await sent, { name: 'AbortError' }, `${door.name}: the client hung up`);
    await until(`${door.name}: the worker is free`, async () => (await busySlots(srv.url)) === 0, 60_000);
    // Were the work not stopped, its charge would commit right after the model call: give it time to show.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const account = (await (await fetch(`${srv.url}/api/v1/account`, { headers: bearer(key.key) })).json()) as any;
    t.equal(account.balance, 10, `${door.name}: nothing charged for the abandoned removal`);
    t.equal(account.credits_used_this_month, 0, `${door.name}: nothing recorded as used`);
  }
});
