/**
 * Each server owns its pipeline (its model call chosen once): a server on an upstream and a local
 * one live side by side in one process, a failed start leaves nothing behind, and closing one
 * never touches the other. In process, with a real protocol server (test/helpers/minimal-oip.ts),
 * real SQLite stores and real ports.
 */
import t from 'tap';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/server/app.js';
import { startMinimalOip } from '../helpers/minimal-oip.js';
import { FIXTURES } from '../helpers/cli.js';
import { bearer, createKey, upload } from '../helpers/api-server.js';

t.test('serve --upstream and a local server in one process: each keeps its own model call', async (t) => {
  const minimal = await startMinimalOip(t);
  const dataDir = async () => {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cutout-lifecycle-'));
    t.teardown(() => fsp.rm(dir, { recursive: true, force: true }));
    return dir;
  };
  const keys = new Map<string, string>();
  const config = async (port: number, upstream?: string) => {
    const dir = await dataDir();
    const loaded = await loadConfig({ ...(upstream ? { upstream } : {}), port, host: '127.0.0.1', dataDir: dir, workers: 1 }, { env: {} });
    keys.set(dir, (await createKey(dir)).key);
    return loaded;
  };
  const photo = fs.readFileSync(path.join(FIXTURES, 'coffee.jpg'));
  const infers = () => minimal.requests.filter((r) => r.path.endsWith('/infer')).length;
  // A preview needs no key's credits: the free path of the sync route (api-spec 2.1).
  const preview = async (server: Awaited<ReturnType<typeof startServer>>) => {
    const { url } = server;
    const key = keys.get(server.context.config.dataDir)!;
    const res = await fetch(`${url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(photo, { size: 'preview' }) });
    return { status: res.status, inference: ((await fetch(`${url}/api/v1/health`).then((r) => r.json())) as { inference: string }).inference };
  };

  // A failed start after the upstream was connected: the port is taken.
  const busy = net.createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => busy.close(() => resolve())));
  await t.rejects(startServer(await config((busy.address() as net.AddressInfo).port, minimal.url)), /Cannot listen/, 'the start fails at listen');
  t.ok(minimal.requests.some((r) => r.path === '/v2/models/isnet-medium'), 'after the upstream was checked');

  const local = await startServer(await config(0));
  const remote = await startServer(await config(0, minimal.url));
  t.teardown(() => local.close());

  const before = infers();
  t.same(await preview(local), { status: 200, inference: 'local' }, 'the local server runs its own model');
  t.equal(infers(), before, 'nothing reached the upstream from the local server');
  t.same(await preview(remote), { status: 200, inference: 'upstream' }, 'the upstream server answers');
  t.equal(infers(), before + 1, 'its model call went upstream');

  await remote.close();
  t.same(await preview(local), { status: 200, inference: 'local' }, 'closing the upstream server leaves the local one running');
  t.equal(infers(), before + 1, 'and still local');
});
