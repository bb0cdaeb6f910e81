/**
 * The upstream model call is process-wide (the pipeline's seam): a server that set it up undoes it
 * when it closes, and when it fails to start after connecting to the upstream. In process, with a
 * real protocol server (test/helpers/minimal-oip.ts), a real SQLite store and real ports.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { usesRemoteInference } from '../src/pipeline/index.js';
import { startServer } from '../src/server/app.js';
import { startMinimalOip } from './helpers/minimal-oip.js';

t.test('serve --upstream in process: the remote model call is cleared on close and on a failed start', async (t) => {
  const minimal = await startMinimalOip(t);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cutout-lifecycle-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const config = (port: number) => loadConfig({ upstream: minimal.url, port, host: '127.0.0.1', dataDir: dir, workers: 1 }, { env: {} });

  // A failed start after the upstream was connected: the port is taken.
  const busy = net.createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => busy.close(() => resolve())));
  const busyPort = (busy.address() as net.AddressInfo).port;
  t.equal(usesRemoteInference(), false, 'local before any server');
  await t.rejects(startServer(await config(busyPort)), /Cannot listen/, 'the start fails at listen');
  t.ok(minimal.requests.some((r) => r.path === '/v2/models/isnet-medium'), 'after the upstream was checked');
  t.equal(usesRemoteInference(), false, 'a failed start leaves the model call local');

  const server = await startServer(await config(0));
  t.equal(usesRemoteInference(), true, 'a running server sends the model call upstream');
  await server.close();
  t.equal(usesRemoteInference(), false, 'closed: local again');
});
