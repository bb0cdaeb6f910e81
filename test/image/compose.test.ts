/**
 * `compose.yaml`: its shape (health checks, `depends_on: condition: service_healthy`, secrets from
 * files, two API servers on one store and one bucket), then the fleet brought up for real with
 * docker-compose: the cutout services from the image, and stand-ins for the images that cannot be
 * pulled here (test/image/standins/: PostgreSQL from Debian's packages, s3rver for MinIO, Debian's
 * Caddy), tagged by the names compose.yaml uses. This machine's daemon has no bridge, so an override
 * (written below) puts every service on the host's network on free loopback ports; everything else
 * is compose.yaml's. A job made through one API server is read through the other and the proxy.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import { buildImage, docker, dockerOk, requireDocker, ROOT } from '../helpers/docker.js';
import { freePort, until } from '../helpers/process.js';

const COMPOSE = fs.existsSync('/usr/bin/docker-compose') ? '/usr/bin/docker-compose' : 'docker-compose';
const PHOTO = fs.readFileSync(path.join(ROOT, 'test', 'fixtures', 'chelsea.jpg'));
const spec = parse(fs.readFileSync(path.join(ROOT, 'compose.yaml'), 'utf8'));
/** The stand-ins, tagged by the pinned names compose.yaml uses. */
const STANDINS: [string, string][] = [['postgres', spec.services.postgres.image], ['minio', spec.services.s3.image], ['caddy', spec.services.proxy.image]];
const CADDYFILE = fs.readFileSync(path.join(ROOT, 'deploy', 'compose', 'Caddyfile'), 'utf8');

t.test('compose.yaml: health checks, healthy dependencies, secrets from files, two API servers on one store and bucket', async (t) => {
  const services = spec.services as Record<string, any>;
  t.same(Object.keys(services).sort(), ['api-1', 'api-2', 'model', 'postgres', 'proxy', 's3', 's3-init'].sort());
  for (const [name, s] of Object.entries(services)) {
    if (name !== 's3-init' && name !== 'proxy') t.ok(s.healthcheck?.test, `${name} has a health check`);
    for (const [dep, cond] of Object.entries<any>(s.depends_on ?? {})) {
      t.match(cond.condition, dep === 's3-init' ? 'service_completed_successfully' : 'service_healthy', `${name} waits for ${dep}`);
    }
  }
  t.same(Object.keys(services.proxy.depends_on).sort(), ['api-1', 'api-2'], 'the proxy waits for both API servers');
  t.same(services['api-1'].environment, services['api-2'].environment, 'both API servers: one store, one bucket, one model server');
  t.match(services['api-1'].environment, { CUTOUT_STORE_FILE: /^\/run\/secrets\//, CUTOUT_RESULTS: /^s3:\/\// });
  for (const [name, s] of Object.entries<any>(spec.secrets)) t.ok(fs.existsSync(path.join(ROOT, s.file)), `secret ${name}: ${s.file}`);
});

t.test('compose.yaml as an operator meets it: loopback only, pinned images, metrics off the proxy, health-checked proxy (issue 51)', async (t) => {
  const services = spec.services as Record<string, any>;
  t.same(services.proxy.ports, ['127.0.0.1:8080:8080'], 'the one published port is on loopback only, beside the committed development secrets');
  for (const [name, s] of Object.entries(services)) {
    if (s.image === 'cutout') continue; // built here from the Dockerfile
    t.match(s.image, /:(?!latest$)[^:]*\d+\.\d+|:RELEASE\.\d{4}-/, `${name}: ${s.image} is pinned to a release, not a moving tag`);
  }
  for (const [name, s] of Object.entries(services).filter(([n]) => n.startsWith('api-'))) {
    t.equal(s.environment.CUTOUT_METRICS_PORT, '9090', `${name}: /metrics on a port of its own`);
    t.notOk(s.ports, `${name}: publishes nothing`);
  }
  t.match(services.proxy.volumes, [/deploy\/compose\/Caddyfile:\/etc\/caddy\/Caddyfile/], 'the proxy runs deploy/compose/Caddyfile');
  t.match(CADDYFILE, /reverse_proxy api-1:8080 api-2:8080/, 'the Caddyfile proxies both API servers');
  t.match(CADDYFILE, /health_uri \/readyz/, 'and asks each for /readyz');
  t.match(CADDYFILE, /lb_try_duration \d+s/, 'and retries a failed request on the other');
});

if (requireDocker(t)) {
  t.test('the fleet: up, a key by compose exec, a job through api-1 read through api-2 and the proxy', async (t) => {
    for (const [dir, tag] of STANDINS) {
      if ((await docker(['image', 'inspect', tag])).status === 0) continue;
      const ca = fs.existsSync('/etc/ssl/certs/ca-certificates.crt') ? ['--secret', 'id=ca_bundle,src=/etc/ssl/certs/ca-certificates.crt'] : [];
      await dockerOk(['build', '--network', 'host', ...ca, '-t', tag, path.join(ROOT, 'test', 'image', 'standins', dir)], { timeoutMs: 15 * 60_000 });
    }
    const mc = (spec.services as Record<string, any>)['s3-init'].image as string;
    if ((await docker(['image', 'inspect', mc])).status !== 0) await dockerOk(['tag', spec.services.s3.image, mc]);
    // compose.yaml's `image: cutout`: built from the Dockerfile as the image test does (its cache makes it quick after that test).
    const tag = process.env.CUTOUT_IMAGE_TAG ?? 'cutout:test';
    await buildImage(tag);
    await dockerOk(['tag', tag, 'cutout:latest']);

    const ports = {
      pg: await freePort(), s3: await freePort(), model: await freePort(), api1: await freePort(), api2: await freePort(), proxy: await freePort(),
      metrics1: await freePort(), metrics2: await freePort(),
    };
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-compose-'));
    const storeUrl = path.join(dir, 'store_url');
    fs.writeFileSync(storeUrl, `${fs.readFileSync(path.join(ROOT, 'deploy/compose/secrets/store_url'), 'utf8').trim().replace('@postgres:5432', `@127.0.0.1:${ports.pg}`)}\n`, { mode: 0o644 });
    // s3rver, standing in for MinIO, knows one key of its own (S3RVER), not the fleet's.
    const s3rverCredentials = path.join(dir, 'aws_credentials');
    fs.writeFileSync(s3rverCredentials, '[default]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n', { mode: 0o644 });
    // The Caddyfile as committed, its addresses moved to the loopback ports.
    const caddyfile = path.join(dir, 'Caddyfile');
    fs.writeFileSync(caddyfile, CADDYFILE.replace('api-1:8080', `127.0.0.1:${ports.api1}`).replace('api-2:8080', `127.0.0.1:${ports.api2}`).replace(':8080 {', `http://127.0.0.1:${ports.proxy} {`), { mode: 0o644 });
    const override = path.join(dir, 'compose.host.yaml');
    fs.writeFileSync(override, hostOverride(ports, storeUrl, s3rverCredentials, caddyfile));
    const project = `cutouttest${process.pid}`;
    // compose.yaml with the override, as compose merges them; then the proxy's published port taken
    // out (a host-network container has none, and compose 1.29 cannot reset a list in an override).
    const merged = await runCompose(['-f', path.join(ROOT, 'compose.yaml'), '-f', override, 'config'], 60_000);
    t.equal(merged.status, 0, `docker-compose config merges compose.yaml and the override${merged.status ? `: ${merged.stderr}` : ''}`);
    const fleet = parse(merged.stdout);
    delete fleet.services.proxy.ports;
    const fleetFile = path.join(dir, 'compose.fleet.yaml');
    fs.writeFileSync(fleetFile, JSON.stringify(fleet, null, 2));
    const compose = (args: string[], timeoutMs = 300_000) => runCompose(['-p', project, '-f', fleetFile, ...args], timeoutMs);
    t.teardown(async () => {
      await compose(['down', '-v', '--timeout', '10']);
      fs.rmSync(dir, { recursive: true, force: true });
    });

    const up = await compose(['up', '-d', '--no-build'], 600_000);
    t.equal(up.status, 0, `docker-compose up: ${up.status === 0 ? 'ok' : up.stderr.slice(-1500)}`);
    if (up.status !== 0) {
      const logs = await compose(['logs', '--no-color', '--tail', '15']);
      t.comment(logs.stdout.slice(-6000));
      return;
    }
    const proxy = `http://127.0.0.1:${ports.proxy}`;
    await until('the proxy answers /readyz', async () => (await fetch(`${proxy}/readyz`).catch(() => null))?.status === 200, 180_000);
    const ps = await compose(['ps']);
    t.match(ps.stdout, /api-1.*healthy/, 'api-1 healthy');

    const exec = await compose(['exec', '-T', 'api-1', 'cutout', 'keys', 'create', '--json']);
    t.equal(exec.status, 0, 'docker-compose exec api-1 cutout keys create');
    const { key } = JSON.parse(exec.stdout) as { key: string };
    const form = new FormData();
    form.append('image_file', new Blob([PHOTO]), 'photo.jpg');
    form.append('size', 'preview');
    const created = await fetch(`http://127.0.0.1:${ports.api1}/api/v1/jobs`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form });
    t.equal(created.status, 202, 'a job made through api-1');
    const { job_id: jobId } = (await created.json()) as { job_id: string };
    const api2 = `http://127.0.0.1:${ports.api2}`;
    const done = await until('the job is done, seen through api-2', async () => {
      const job = (await (await fetch(`${api2}/api/v1/jobs/${jobId}`, { headers: { Authorization: `Bearer ${key}` } })).json()) as { status: string };
      return job.status === 'done' || job.status === 'failed' ? job : null;
    }, 120_000);
    t.equal(done.status, 'done', 'the job is done');
    for (const [name, base] of [['api-2', api2], ['the proxy', proxy]]) {
      const result = await fetch(`${base}/api/v1/results/${jobId}`);
      t.equal(result.status, 200, `the result read through ${name}`);
      t.equal(result.headers.get('content-type'), 'image/png');
    }

    // /metrics: not through the proxy, only on each server's metrics port.
    t.equal((await fetch(`${proxy}/metrics`)).status, 404, '/metrics through the proxy: 404');
    const scraped = await fetch(`http://127.0.0.1:${ports.metrics1}/metrics`);
    t.equal(scraped.status, 200, "api-1's metrics port answers /metrics");
    t.match(await scraped.text(), /cutout_/, 'with cutout\'s metrics');

    // A rolling restart through the health-checked proxy: api-1 stopped and started again while
    // requests keep coming; none is answered 502 (or anything but 200).
    const statuses: number[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        statuses.push((await fetch(`${proxy}/api/v1/health`).catch(() => null))?.status ?? 0);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    t.equal((await compose(['stop', '-t', '30', 'api-1'])).status, 0, 'api-1 stopped');
    await new Promise((r) => setTimeout(r, 3000));
    t.equal((await compose(['start', 'api-1'])).status, 0, 'api-1 started again');
    await until('api-1 ready again', async () => (await fetch(`http://127.0.0.1:${ports.api1}/readyz`).catch(() => null))?.status === 200, 120_000);
    polling = false;
    await poller;
    const bad = statuses.filter((s) => s !== 200);
    t.ok(statuses.length > 20, `${statuses.length} requests through the proxy during the restart`);
    t.same(bad, [], `every one answered 200 (${bad.length} did not: ${[...new Set(bad)].join(', ') || 'none'})`);
  });
}

function runCompose(args: string[], timeoutMs: number) {
  return import('node:child_process').then(({ spawn }) => new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(COMPOSE, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, DOCKER_BUILDKIT: '1', COMPOSE_DOCKER_CLI_BUILD: '1' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (status) => { clearTimeout(timer); resolve({ status, stdout, stderr }); });
  }));
}

/** Every service on the host's network, on the free ports; addresses that were service names become 127.0.0.1. */
function hostOverride(p: Record<string, number>, storeUrlFile: string, s3rverCredentials: string, caddyfile: string): string {
  const api = (port: number, metricsPort: number) => ({
    network_mode: 'host',
    environment: {
      CUTOUT_PORT: String(port), CUTOUT_METRICS_PORT: String(metricsPort), CUTOUT_UPSTREAM: `http://127.0.0.1:${p.model}`, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${p.s3}`,
      CUTOUT_STORE_FILE: '/run/secrets/store_url_host', AWS_SHARED_CREDENTIALS_FILE: '/run/secrets/aws_credentials_s3rver',
    },
    secrets: ['store_url_host', 'aws_credentials_s3rver'],
  });
  const doc = {
    services: {
      postgres: { network_mode: 'host', environment: { PGPORT: String(p.pg) }, healthcheck: { test: ['CMD', 'pg_isready', '-h', '127.0.0.1', '-p', String(p.pg)] } },
      s3: { network_mode: 'host', command: ['server', '/data', '--address', `:${p.s3}`], healthcheck: { test: ['CMD', 'mc', 'ready', `http://127.0.0.1:${p.s3}`] } },
      's3-init': { network_mode: 'host', command: [`mc alias set fleet http://127.0.0.1:${p.s3} x y && mc mb --ignore-existing fleet/cutout-results`] },
      model: {
        network_mode: 'host', environment: { CUTOUT_MODEL_SERVER_PORT: String(p.model) },
        healthcheck: { test: ['CMD', 'cutout', 'health', '--url', `http://127.0.0.1:${p.model}/v2/health/ready`] },
      },
      'api-1': api(p.api1, p.metrics1),
      'api-2': api(p.api2, p.metrics2),
      proxy: { network_mode: 'host', volumes: [`${caddyfile}:/etc/caddy/Caddyfile:ro`] },
    },
    secrets: { store_url_host: { file: storeUrlFile }, aws_credentials_s3rver: { file: s3rverCredentials } },
  };
  return JSON.stringify(doc, null, 2);
}
