/**
 * Request ids and the request log of the real `cutout serve` (a child process; its stdout
 * captured): a sane X-Request-Id is echoed, an insane one replaced, every answer carries one
 * (errors and 404s too), each request gives exactly one JSON line with its id, route pattern,
 * status and duration, and never the API key, a body or a raw result URL. --log-level and
 * CUTOUT_LOG_LEVEL quiet it. Health names the store and the server. Plus the pure id rule.
 */
import t from 'tap';
import crypto from 'node:crypto';
import os from 'node:os';
import { chooseRequestId } from '../../src/server/request-log.js';
import { bearer, createKey, startServe, type ServeProcess } from '../helpers/api-server.js';
import { runCli } from '../helpers/cli.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Everything the child writes to stdout from now on, as lines. */
function captureStdout(srv: ServeProcess): () => string[] {
  let out = '';
  srv.child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  return () => out.split('\n').filter(Boolean);
}

/** The JSON log lines of one request id, once at least one is there (the line is written as the response ends). */
async function linesOf(lines: () => string[], id: string, timeoutMs = 5000): Promise<any[]> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const found = lines().filter((l) => l.includes(id)).map((l) => JSON.parse(l));
    if (found.length || Date.now() > end) {
      // Give a second line (which must not exist) the time to show up.
      await new Promise((r) => setTimeout(r, 100));
      return lines().filter((l) => l.includes(id)).map((l) => JSON.parse(l));
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test('chooseRequestId keeps sane ids and replaces the rest', async (t) => {
  for (const id of ['a', 'abc-123', 'req_01HZX.9:2', crypto.randomUUID(), 'x'.repeat(128)]) t.equal(chooseRequestId(id), id, `kept: ${id.slice(0, 20)}`);
  for (const id of ['', 'x'.repeat(129), 'has space', 'a,b', 'quote"d', 'new\nline', 'ünïcode', '{"level":"fatal"}']) {
    t.match(chooseRequestId(id), UUID, `replaced: ${JSON.stringify(id.slice(0, 20))}`);
  }
  t.match(chooseRequestId(undefined), UUID, 'absent: a new one');
  t.match(chooseRequestId(['a', 'b']), UUID, 'repeated header: a new one');
  t.not(chooseRequestId(undefined), chooseRequestId(undefined), 'a new one each time');
});

t.test('X-Request-Id on every answer, one JSON line per request, no key, no body, no raw URL', async (t) => {
  const srv = await startServe(t, ['--rate-limit', '100000', '--allow-private-network']);
  const lines = captureStdout(srv);
  const { key } = await createKey(srv.dataDir);

  // A sane id is echoed and logged.
  const sane = `test-${crypto.randomUUID()}`;
  const ok = await fetch(`${srv.url}/api/v1/account`, { headers: bearer(key, { 'X-Request-Id': sane }) });
  t.equal(ok.status, 200);
  t.equal(ok.headers.get('x-request-id'), sane, 'echoed');
  const [line, ...more] = await linesOf(lines, sane);
  t.equal(more.length, 0, 'exactly one line for the request');
  t.match(line, { level: 'info', requestId: sane, method: 'GET', route: '/api/v1/account', status: 200, msg: 'request completed' });
  t.type(line.durationMs, 'number');
  t.ok(Date.parse(line.time) > 0, 'an ISO time');
  t.match(line.server, new RegExp(`^${os.hostname()}:${srv.child.pid}:`), "the server's identity");

  // Insane ids are replaced by a new UUID, which is what the line carries.
  for (const insane of ['x'.repeat(129), 'two words', '<script>']) {
    const res = await fetch(`${srv.url}/api/v1/health`, { headers: { 'X-Request-Id': insane } });
    const given = res.headers.get('x-request-id')!;
    t.match(given, UUID, `${insane.slice(0, 12)}... replaced`);
    const logged = await linesOf(lines, given);
    t.equal(logged.length, 1);
    t.equal(logged[0].route, '/api/v1/health');
  }

  // Errors carry an id too (a new one when none was sent), and are logged with their status.
  const errors: [string, RequestInit, number, string][] = [
    ['/api/v1/account', {}, 401, '/api/v1/account'],
    [`/no/such/path/${crypto.randomUUID()}`, {}, 404, 'unmatched'],
    ['/api/v1/jobs/not-a-uuid', { headers: bearer(key) }, 422, '/api/v1/jobs/:job_id'],
    ['/api/v1/jobs', { method: 'POST', headers: bearer(key, { 'Content-Type': 'application/json' }), body: '{"image_url": "secret-body-marker' }, 400, '/api/v1/jobs'],
  ];
  for (const [p, init, status, route] of errors) {
    const res = await fetch(`${srv.url}${p}`, init);
    t.equal(res.status, status, `${p} answers ${status}`);
    const id = res.headers.get('x-request-id')!;
    t.match(id, UUID, `${status} carries a new id`);
    const logged = await linesOf(lines, id);
    t.equal(logged.length, 1, 'one line');
    t.match(logged[0], { status, route, level: 'info' }, `logged as ${status} on ${route}`);
  }

  // A replay of an Idempotency-Key answers with the new request's id, not the first one's.
  const createWith = (requestId: string) => fetch(`${srv.url}/api/v1/jobs`, {
    method: 'POST',
    headers: bearer(key, { 'Content-Type': 'application/json', 'Idempotency-Key': 'log-test-1', 'X-Request-Id': requestId }),
    body: JSON.stringify({ image_url: 'http://127.0.0.1:9/never.jpg' }),
  });
  const original = await createWith('first-request');
  const replay = await createWith('second-request');
  t.same([original.status, replay.status], [202, 202]);
  t.equal(replay.headers.get('idempotent-replayed'), 'true', 'a replay');
  t.equal(replay.headers.get('x-request-id'), 'second-request', "with the replay's own id");
  t.match((await linesOf(lines, 'second-request'))[0], { route: '/api/v1/jobs', status: 202 });

  // A result URL is a capability: its id stays out of the log (the route pattern stands for it).
  const resultId = crypto.randomUUID();
  const result = await fetch(`${srv.url}/api/v1/results/${resultId}?x=query-marker`);
  t.equal(result.status, 404);
  t.match((await linesOf(lines, result.headers.get('x-request-id')!))[0], { route: '/api/v1/results/:job_id' });

  const all = lines().join('\n');
  t.notOk(all.includes(key), 'the API key is never logged');
  t.notOk(all.includes(key.slice(-16)), 'not even its end');
  t.notOk(all.includes('secret-body-marker'), 'no body');
  t.notOk(all.includes(resultId), 'no result id');
  t.notOk(all.includes('query-marker'), 'no query string');
  t.notOk(/authorization/i.test(all), 'no headers');
  // (The listening line came before, and startServe found it: it stays plain.)
  t.ok(lines().length >= 11, `${lines().length} lines after the listening line`);
  for (const l of lines()) t.doesNotThrow(() => JSON.parse(l), 'every line after the listening line is JSON');
});

t.test('--log-level and CUTOUT_LOG_LEVEL quiet the log; the ids stay', async (t) => {
  const silent = await startServe(t, ['--log-level', 'silent']);
  const silentLines = captureStdout(silent);
  const warn = await startServe(t, [], { env: { CUTOUT_LOG_LEVEL: 'warn' } });
  const warnLines = captureStdout(warn);
  for (const srv of [silent, warn]) {
    const res = await fetch(`${srv.url}/no/such/path`, { headers: { 'X-Request-Id': 'quiet-1' } });
    t.equal(res.status, 404);
    t.equal(res.headers.get('x-request-id'), 'quiet-1', 'the id is still echoed');
  }
  // Make sure the lines would have had time to appear.
  await new Promise((r) => setTimeout(r, 300));
  t.same(silentLines(), [], 'silent: nothing on stdout');
  t.same(warnLines(), [], 'warn: a 404 (info) is not logged');

  const bad = await runCli(['serve', '--port', '0', '--log-level', 'loud']);
  t.equal(bad.code, 2, 'a bad level is a usage error');
  t.match(bad.stderr, /one of trace, debug, info, warn, error, fatal, silent for logLevel/);
  t.equal(bad.stderr.trim().split('\n').length, 1, 'in one line');
});

t.test('health names the store and the server', async (t) => {
  const srv = await startServe(t);
  const res = await fetch(`${srv.url}/api/v1/health`);
  t.equal(res.status, 200);
  const body = (await res.json()) as any;
  t.equal(body.store, 'sqlite');
  t.equal(body.server.host, os.hostname());
  t.equal(body.server.pid, srv.child.pid);
  t.ok(Math.abs(Date.parse(body.server.startedAt) - Date.now()) < 120_000, 'started just now');
  t.match(body.server.id, new RegExp(`^${os.hostname()}:${srv.child.pid}:${Date.parse(body.server.startedAt)}:[0-9a-f]+$`));
  t.equal(body.status, 'ok', 'the rest of health is as before');
});
