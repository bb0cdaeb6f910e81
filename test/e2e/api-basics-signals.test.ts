/**
 * The clean stop of `cutout serve` under signals (moved from api-basics.test.ts, whose other
 * tests run in process): a real child process, the real model busy while the signals arrive.
 */
import t from 'tap';
import fs from 'node:fs/promises';
import { bearer, createKey, startServe, upload } from '../helpers/api-server.js';

t.test('a second signal of either kind, during an inference, stops the server at once and without a native abort', async (t) => {
  const image = await fs.readFile(new URL('../fixtures/astronaut.jpg', import.meta.url));
  for (const [first, second] of [['SIGTERM', 'SIGINT'], ['SIGINT', 'SIGTERM']] as const) {
    const srv = await startServe(t);
    const { key } = await createKey(srv.dataDir);
    // Three sync removals keep the inference worker busy through the two signals.
    const requests = [0, 1, 2].map(() => fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key), body: upload(image) }).catch(() => null));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    srv.child.kill(first);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const end = await srv.stop(second);
    await Promise.all(requests);
    t.equal(end.signal, second, `${first} then ${second}: ended by ${second} (${srv.stderr().trim()})`);
    t.ok(end.ms < 1500, `${first} then ${second}: at once (${end.ms} ms)`);
    t.notMatch(srv.stderr(), /terminate called|Napi::Error/, 'no native abort');
  }
});

t.test('SIGTERM and SIGINT stop the server cleanly', async (t) => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const srv = await startServe(t);
    t.equal((await fetch(`${srv.url}/api/v1/health`)).status, 200);
    const end = await srv.stop(signal);
    t.equal(end.code, 0, `${signal}: exit code 0 (${srv.stderr().trim()})`);
    t.ok(end.ms < 1900, `${signal}: stopped in ${end.ms} ms, without the 2 s fallback`);
    await t.rejects(fetch(`${srv.url}/api/v1/health`), 'no longer listening');
  }
});
