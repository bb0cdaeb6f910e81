/**
 * Traces (issue 56), against a real OTLP/HTTP receiver in this test: `cutout model-server` exports
 * in http/protobuf, `cutout serve --upstream` in http/json, both real child processes configured
 * only by the SDK's OTEL_* variables. Checked: a sync removal's span tree (the request's span, a
 * child of the client's `traceparent`, with the wait for a worker, the pipeline and its decode,
 * inference and encode, the results store), the model server's spans joining the trace under the
 * upstream inference span (its service named by OTEL_SERVICE_NAME), a job's run and its callback's delivery joining the trace of the request
 * that created it (the callback's POST carrying `traceparent`), the resource (OTEL_SERVICE_NAME's
 * default `cutout`, OTEL_RESOURCE_ATTRIBUTES), and that no key, secret, job id or image byte
 * reaches the receiver. And with tracing off (or OTEL_SDK_DISABLED=true), that the server loads no
 * module of the SDK (a loader hook and the require cache, in the child): only @opentelemetry/api's
 * own files, which prom-client requires for its exemplars whatever tracing does.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bearer, createKey, startServe } from './helpers/api-server.js';
import { startReceiver } from './helpers/callback-receiver.js';
import { FIXTURES, ROOT } from './helpers/cli.js';
import { startOtlpReceiver, type ReceivedSpan } from './helpers/otlp-receiver.js';
import { startListening } from './helpers/process.js';

const CHELSEA = fs.readFileSync(path.join(FIXTURES, 'chelsea.jpg'));
const WATCH = path.join(ROOT, 'test', 'helpers', 'module-watch.mjs');
const CALLBACK_SECRET = `cb-secret-${crypto.randomBytes(12).toString('hex')}`;

/** The environment without any OTEL_* variable of the test runner's own. */
function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_'))) as Record<string, string>;
  return { ...env, ...extra };
}

/** A module watch file of a child (module-watch.mjs), and what it saw. */
function moduleWatch(t: Tap.Test): { env: Record<string, string>; seen(): string[] } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-modules-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'modules.txt');
  fs.writeFileSync(file, '');
  return {
    env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${WATCH}`.trim(), CUTOUT_MODULE_WATCH: file },
    seen: () => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean),
  };
}

const hex = (bytes: number) => crypto.randomBytes(bytes).toString('hex');
const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan) => spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);
const names = (spans: ReceivedSpan[]) => spans.map((s) => s.name).sort();

const otlp = await startOtlpReceiver(t);
// Spans leave every 100 ms (the batch processor's own variable), so the test waits little.
const OTEL = { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '100' };

t.test('a removal through serve --upstream: one trace from the client to the model server', async (t) => {
  const watch = moduleWatch(t);
  const model = await startListening(t, ['model-server', '--port', '0'], {
    // OTEL_SERVICE_NAME over the model server's default name (cutout-model-server), read by the SDK.
    env: cleanEnv({ ...OTEL, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_SERVICE_NAME: 'inference-pool-a' }), timeoutMs: 60_000,
  });
  const srv = await startServe(t, ['--upstream', model.url, '--allow-private-network', '--log-level', 'silent'], {
    env: cleanEnv({
      ...OTEL, ...watch.env, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
      CUTOUT_CALLBACK_SECRET: CALLBACK_SECRET,
    }),
  });
  const key = await createKey(srv.dataDir);

  // A sync removal under the client's own trace.
  const client = { trace: hex(16), span: hex(8) };
  const form = new FormData();
  form.append('image_file', new Blob([CHELSEA]), 'chelsea.jpg');
  form.append('size', 'full');
  const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key, { traceparent: `00-${client.trace}-${client.span}-01` }), body: form });
  t.equal(res.status, 200, 'the removal answers');
  await res.arrayBuffer();

  const spans = await otlp.waitFor('the request span and the model server\'s', (all) =>
    all.some((s) => s.traceId === client.trace && s.name === 'POST /api/v1/remove')
    && all.some((s) => s.traceId === client.trace && s.resource['service.name'] === 'inference-pool-a' && s.kind === 2));
  const trace = spans.filter((s) => s.traceId === client.trace);
  const request = trace.find((s) => s.name === 'POST /api/v1/remove')!;
  t.equal(request.parentSpanId, client.span, 'the request span\'s parent is the client\'s traceparent');
  t.equal(request.kind, 2, 'a server span');
  t.match(request.attributes, { 'http.route': '/api/v1/remove', 'http.response.status_code': 200, 'cutout.door': 'v1', 'cutout.key_id': key.id, 'http.request.method': 'POST' });
  t.match(request.resource, { 'service.name': 'cutout', 'deployment.environment': 'test' }, 'service.name defaults to cutout; OTEL_RESOURCE_ATTRIBUTES is read by the SDK');
  t.equal(request.encoding, 'json', 'serve sent http/json (OTEL_EXPORTER_OTLP_PROTOCOL)');

  await otlp.waitFor('the request\'s children', (all) => childrenOf(all, request).length >= 3);
  const children = childrenOf(otlp.spans, request);
  t.same(names(children), ['cutout.pipeline', 'cutout.store', 'cutout.wait_for_worker'], 'the request: the wait for a worker, the pipeline, the results store');
  const pipeline = children.find((s) => s.name === 'cutout.pipeline')!;
  const stages = childrenOf(otlp.spans, pipeline);
  t.same(names(stages), ['cutout.decode', 'cutout.encode', 'cutout.inference'], 'the pipeline: decode, inference, encode');
  const byName = Object.fromEntries(stages.map((s) => [s.name, s]));
  t.ok(byName['cutout.decode'].startMs >= pipeline.startMs - 1 && byName['cutout.encode'].endMs <= pipeline.endMs + 1, 'the stages lie within the pipeline span');
  t.ok(byName['cutout.decode'].endMs <= byName['cutout.inference'].startMs + 1 && byName['cutout.inference'].endMs <= byName['cutout.encode'].startMs + 50, 'in order: decode, inference, encode');
  const inference = byName['cutout.inference'];
  t.equal(inference.kind, 3, 'the upstream inference is a client span');
  t.equal(inference.attributes['cutout.inference.where'], 'upstream');
  t.match(pipeline.attributes, { 'cutout.size.resolved': 'full', 'cutout.width': 451, 'cutout.height': 300 });

  const modelSpan = trace.find((s) => s.resource['service.name'] === 'inference-pool-a' && s.kind === 2)!;
  t.equal(modelSpan.parentSpanId, inference.spanId, 'the model server\'s span joins the trace under the upstream inference span (traceparent sent)');
  t.equal(modelSpan.encoding, 'protobuf', 'the model server sent http/protobuf');
  t.match(modelSpan.attributes, { 'http.route': '/v2/models/{model}/infer', 'http.response.status_code': 200 });
  await otlp.waitFor('the model server\'s inner spans', (all) => childrenOf(all, modelSpan).length >= 2);
  t.same(names(childrenOf(otlp.spans, modelSpan)), ['cutout.model_server.run', 'cutout.model_server.wait'], 'the model server: its slot, its run');

  // A job under another client trace, with a callback: its run and its delivery join that trace.
  const receiver = await startReceiver(t);
  const jobClient = { trace: hex(16), span: hex(8) };
  const jobForm = new FormData();
  jobForm.append('image_file', new Blob([CHELSEA]), 'chelsea.jpg');
  const created = await fetch(`${srv.url}/api/v1/jobs`, {
    method: 'POST', headers: bearer(key.key, { traceparent: `00-${jobClient.trace}-${jobClient.span}-01`, 'X-Callback-Url': `${receiver.url}/cb` }), body: jobForm,
  });
  t.equal(created.status, 202, 'the job is queued');
  const jobId = ((await created.json()) as { job_id: string }).job_id;
  const [callback] = await receiver.waitFor((r) => r.path === '/cb', 1, 60_000);
  const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(String(callback.headers.traceparent));
  t.ok(sent, `the callback POST carries a traceparent (${callback.headers.traceparent})`);
  t.equal(sent?.[1], jobClient.trace, 'in the trace of the request that created the job');

  const jobSpans = await otlp.waitFor('the job\'s spans and its callback\'s', (all) => all.some((s) => s.traceId === jobClient.trace && s.name === 'cutout.callback'));
  const jobTrace = jobSpans.filter((s) => s.traceId === jobClient.trace);
  const post = jobTrace.find((s) => s.name === 'POST /api/v1/jobs')!;
  t.equal(post.parentSpanId, jobClient.span, 'the job\'s request span: a child of the client\'s traceparent');
  const job = jobTrace.find((s) => s.name === 'cutout.job')!;
  t.equal(job.parentSpanId, post.spanId, 'the job\'s run joins the trace of the request that created it');
  t.equal(job.kind, 5, 'a consumer span');
  t.ok(jobTrace.some((s) => s.name === 'cutout.queue_wait' && s.parentSpanId === post.spanId), 'its time in the queue');
  t.ok(jobTrace.some((s) => s.name === 'cutout.pipeline' && s.parentSpanId === job.spanId), 'its pipeline under the job');
  t.ok(jobTrace.some((s) => s.name === 'cutout.store' && s.parentSpanId === job.spanId), 'its results store under the job');
  const delivery = jobTrace.find((s) => s.name === 'cutout.callback')!;
  t.equal(delivery.parentSpanId, job.spanId, 'the callback\'s delivery: a child of the job\'s run');
  t.equal(sent?.[2], delivery.spanId, 'the POST\'s traceparent names the delivery span');
  t.match(delivery.attributes, { 'cutout.callback.attempt': 1, 'http.response.status_code': 200 });

  // A request without traceparent starts a trace of its own.
  t.equal((await fetch(`${srv.url}/api/v1/account`, { headers: bearer(key.key) })).status, 200);
  const own = await otlp.waitFor('the account request', (all) => all.some((s) => s.name === 'GET /api/v1/account'));
  t.equal(own.find((s) => s.name === 'GET /api/v1/account')!.parentSpanId, '', 'a root span without traceparent');

  // The probes have no trace: a collector would drown in them.
  for (const probe of ['/readyz', '/metrics', '/api/v1/health']) t.equal((await fetch(`${srv.url}${probe}`)).status, 200, `${probe} answers`);
  t.equal((await fetch(`${srv.url}/api/v1/account`, { headers: bearer(key.key) })).status, 200);
  await otlp.waitFor('a second account request', (all) => all.filter((s) => s.name === 'GET /api/v1/account').length >= 2);
  t.same(otlp.spans.filter((s) => ['/readyz', '/metrics', '/api/v1/health'].includes(String(s.attributes['http.route']))), [], 'no span for /readyz, /metrics or /api/v1/health');

  // What must never leave: the key, the callback secret, job ids (capability URLs), the image.
  const everything = Buffer.concat(otlp.bodies);
  for (const [what, secret] of [['the API key', key.key], ['the callback secret', CALLBACK_SECRET], ['the job id', jobId], ['the callback URL', receiver.url]] as const) {
    t.equal(everything.indexOf(secret), -1, `${what} is in no exported span`);
  }
  t.equal(everything.indexOf(CHELSEA.subarray(1000, 1064)), -1, 'no image bytes');
  const longest = Math.max(...otlp.spans.flatMap((s) => Object.values(s.attributes).map((v) => String(v).length)));
  t.ok(longest < 200, `no attribute holds a blob (longest ${longest} characters)`);

  // The module watch saw the SDK loaded in the traced server (so its silence below means something).
  await srv.stop('SIGTERM');
  const seen = watch.seen();
  t.ok(seen.includes('exit'), 'the watch ran to the server\'s exit');
  t.ok(seen.some((l) => l.includes('@opentelemetry/sdk-node')), 'with tracing on, the SDK was loaded');
});

t.test('a removal with the model in the server: the inference span from the pipeline\'s timings', async (t) => {
  const srv = await startServe(t, ['--log-level', 'silent'], { env: cleanEnv({ ...OTEL }) });
  const key = await createKey(srv.dataDir);
  const trace = hex(16);
  const form = new FormData();
  form.append('image_file', new Blob([CHELSEA]), 'chelsea.jpg');
  const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key, { traceparent: `00-${trace}-${hex(8)}-01` }), body: form });
  t.equal(res.status, 200);
  await res.arrayBuffer();
  const spans = await otlp.waitFor('the local removal\'s stages', (all) => all.filter((s) => s.traceId === trace && s.name.startsWith('cutout.')).length >= 6);
  const pipeline = spans.find((s) => s.traceId === trace && s.name === 'cutout.pipeline')!;
  const stages = childrenOf(spans, pipeline);
  t.same(names(stages), ['cutout.decode', 'cutout.encode', 'cutout.inference'], 'decode, inference, encode under the pipeline');
  const inference = stages.find((s) => s.name === 'cutout.inference')!;
  t.equal(inference.attributes['cutout.inference.where'], 'local');
  t.equal(inference.kind, 1, 'an internal span');
  t.ok(inference.endMs - inference.startMs > 1, `it lasts what the model took (${(inference.endMs - inference.startMs).toFixed(0)} ms)`);
  t.equal(spans.find((s) => s.traceId === trace && s.kind === 2)?.encoding, 'protobuf', 'http/protobuf, the SDK\'s default protocol');
});

/**
 * prom-client (the /metrics registry, loaded by every server) requires @opentelemetry/api, the
 * API's no-op package, for its exemplars: that was so before tracing came, and is the API only.
 * What prom-client alone loads, in a bare node.
 */
async function loadedByPromClient(t: Tap.Test): Promise<Set<string>> {
  const watch = moduleWatch(t);
  const { execFileSync } = await import('node:child_process');
  execFileSync(process.execPath, ['-e', 'require("prom-client")'], { cwd: ROOT, env: cleanEnv(watch.env) });
  return new Set(watch.seen().filter((l) => l !== 'exit'));
}

t.test('tracing off: no module of the SDK is loaded (only the API that prom-client loads anyway)', async (t) => {
  const byPromClient = await loadedByPromClient(t);
  t.ok([...byPromClient].every((l) => l.includes('/@opentelemetry/api/')), `prom-client alone loads @opentelemetry/api's files (${byPromClient.size}) and nothing else of OpenTelemetry`);
  for (const [what, env] of [
    ['no OTLP endpoint', {}],
    ['OTEL_SDK_DISABLED=true with an endpoint', { ...OTEL, OTEL_SDK_DISABLED: 'true' }],
  ] as const) {
    const watch = moduleWatch(t);
    const srv = await startServe(t, ['--log-level', 'silent'], { env: cleanEnv({ ...env, ...watch.env }) });
    const key = await createKey(srv.dataDir);
    const form = new FormData();
    form.append('image_file', new Blob([CHELSEA]), 'chelsea.jpg');
    const res = await fetch(`${srv.url}/api/v1/remove`, { method: 'POST', headers: bearer(key.key, { traceparent: `00-${hex(16)}-${hex(8)}-01` }), body: form });
    t.equal(res.status, 200, `${what}: a removal`);
    await res.arrayBuffer();
    await srv.stop('SIGTERM');
    const seen = watch.seen();
    t.ok(seen.includes('exit'), `${what}: the watch ran to the server's exit`);
    const loaded = seen.filter((l) => l !== 'exit');
    t.same(loaded.filter((l) => !byPromClient.has(l)), [], `${what}: no @opentelemetry module beyond what prom-client loads (${loaded.length} of the API's files)`);
    t.notOk(loaded.some((l) => /@opentelemetry\/(sdk-|exporter-|core|resources|otlp-)/.test(l)), `${what}: nothing of the SDK, its exporters or its core`);
  }
});
