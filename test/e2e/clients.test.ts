/**
 * Every door answers the vendors' documented requests from the clients their users copy them into
 * (issue 52): Python requests, httpx and aiohttp; PHP curl (CURLFile) and Guzzle; Ruby Net::HTTP
 * and rest-client; Go's mime/multipart; curl. Each client runs, in a child process, one script
 * of the same ten requests (test/fixtures/clients/): for v1 an upload, a URL and base64; for
 * remove.bg an upload (size=auto), a URL and base64; for rembg an upload and GET ?url=; for
 * Photoroom and Clipdrop an upload. The URL is a server of this test on 127.0.0.1 (the server
 * runs with --allow-private-network, as its URL guard refuses loopback otherwise). Each answer
 * must be a cutout of the photo's size with alpha, with the door's headers (credits, confidence).
 *
 * The clients are Debian packages (docs/testing.md names them; .ci/run installs them). One that
 * is missing is skipped with the package's name, except under CI=true, where it fails.
 * One `cutout serve` for all, a 640x426 photo (over remove.bg's 0.25 MP preview, so that
 * size=auto must be read to get the full size), two clients at a time.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { openStore } from '../../src/store/db.js';
import { createKey, startServe, tempDataDir } from '../helpers/api-server.js';
import { FIXTURES } from '../helpers/cli.js';

const SCRIPTS = path.join(FIXTURES, 'clients');
const CI = process.env.CI === 'true';
const work = await tempDataDir(t);

const image = path.join(work, 'photo.jpg');
await sharp(await fs.readFile(path.join(FIXTURES, 'chelsea.jpg'))).resize(640, 426).jpeg({ quality: 85 }).toFile(image);
const WIDTH = 640, HEIGHT = 426;

/** The photo over http on loopback: what `image_url` and rembg's `?url=` name. */
const photos = http.createServer((req, res) => {
  if (req.url !== '/photo.jpg') return void res.writeHead(404).end();
  void fs.readFile(image).then((data) => res.writeHead(200, { 'Content-Type': 'image/jpeg', 'Content-Length': data.length }).end(data));
});
await new Promise<void>((resolve) => photos.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise((resolve) => photos.close(resolve)));
const photoUrl = `http://127.0.0.1:${(photos.address() as AddressInfo).port}/photo.jpg`;

const srv = await startServe(t, ['--allow-private-network', '--rate-limit', '1000'], { env: { CUTOUT_QUALITY: 'fast' } });
const key = await createKey(srv.dataDir);
{
  // Ten requests per client, most of them charged: a new key has 10 credits.
  const store = await openStore(srv.dataDir);
  await store.ledger.addCredits(key.account, 200);
  await store.close();
}

interface Line { id: string; status: number; headers: Record<string, string>; file: string }
interface Run { code: number | null; stdout: string; stderr: string }

function run(cmd: string, args: string[], env: Record<string, string> = {}, cwd = work): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env } });
    let stdout = '', stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', (err) => resolve({ code: -1, stdout, stderr: String(err) }));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Go with everything it writes in the test's folder and no network: no module, no proxy. */
const goEnv = { GOPATH: path.join(work, 'gopath'), GOCACHE: path.join(work, 'gocache'), GOFLAGS: '', GOPROXY: 'off', GO111MODULE: 'off', GOTOOLCHAIN: 'local' };
const guzzle = process.env.GUZZLE_AUTOLOAD ?? '/usr/share/php/GuzzleHttp/autoload.php';

interface Client {
  name: string;
  /** The Debian package that provides it. */
  pkg: string;
  /** Exits 0 when the client is installed; its stdout says its version. */
  probe: [string, string[]];
  /** Runs the ten requests with the plan file; its stdout is one Line per request. */
  run(plan: string, out: string): Promise<Run>;
}

const script = (name: string) => path.join(SCRIPTS, name);
/**
 * Debian's Python, whose dist-packages hold python3-requests, -httpx and -aiohttp: a `python3`
 * earlier on PATH (pyenv, a venv) has packages of its own, or none of these.
 */
const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const clients: Client[] = [
  { name: 'Python requests', pkg: 'python3-requests', probe: [python, ['-c', 'import requests; print(requests.__version__)']], run: (plan) => run(python, [script('clients.py'), 'requests', plan]) },
  { name: 'Python httpx', pkg: 'python3-httpx', probe: [python, ['-c', 'import httpx; print(httpx.__version__)']], run: (plan) => run(python, [script('clients.py'), 'httpx', plan]) },
  { name: 'Python aiohttp', pkg: 'python3-aiohttp', probe: [python, ['-c', 'import aiohttp; print(aiohttp.__version__)']], run: (plan) => run(python, [script('clients.py'), 'aiohttp', plan]) },
  { name: 'PHP curl (CURLFile)', pkg: 'php-cli and php-curl', probe: ['php', ['-r', 'if (!function_exists("curl_init")) exit(1); echo PHP_VERSION, " curl ", curl_version()["version"];']], run: (plan) => run('php', [script('curl.php'), plan]) },
  { name: 'PHP Guzzle', pkg: 'php-guzzlehttp-guzzle', probe: ['php', ['-r', `require ${JSON.stringify(guzzle)}; echo GuzzleHttp\\ClientInterface::MAJOR_VERSION;`]], run: (plan) => run('php', [script('guzzle.php'), plan], { GUZZLE_AUTOLOAD: guzzle }) },
  { name: 'Ruby Net::HTTP', pkg: 'ruby', probe: ['ruby', ['-rnet/http', '-e', 'print RUBY_VERSION']], run: (plan) => run('ruby', [script('net_http.rb'), plan]) },
  { name: 'Ruby rest-client', pkg: 'ruby-rest-client', probe: ['ruby', ['-rrest-client', '-e', 'print RestClient::VERSION']], run: (plan) => run('ruby', [script('rest_client.rb'), plan]) },
  { name: 'Go mime/multipart', pkg: 'golang-go', probe: ['go', ['version']], run: (plan) => run('go', ['run', script('main.go'), plan], goEnv) },
  { name: 'curl', pkg: 'curl', probe: ['curl', ['--version']], run: (plan, out) => runCurl(plan, out) },
];

/**
 * curl's lines as the docs write them (`-F image_file=@photo.jpg`, `-d`, `--data-urlencode`),
 * each request a curl process, read back as the scripts' lines.
 */
async function runCurl(planFile: string, out: string): Promise<Run> {
  const plan = JSON.parse(await fs.readFile(planFile, 'utf8')) as { base: string; key: string; image: string; url: string };
  const b64 = path.join(out, 'photo.b64');
  await fs.writeFile(b64, (await fs.readFile(plan.image)).toString('base64'));
  const b64Json = path.join(out, 'b64.json');
  await fs.writeFile(b64Json, JSON.stringify({ image_file_b64: (await fs.readFile(b64, 'utf8')), size: 'full' }));
  const bearer = ['-H', `Authorization: Bearer ${plan.key}`];
  const apiKey = ['-H', `X-Api-Key: ${plan.key}`];
  const json = ['-H', 'Content-Type: application/json'];
  const img = `@${plan.image}`;
  const requests: [string, string[]][] = [
    ['v1-file', [...bearer, '-F', `image_file=${img}`, '-F', 'size=full', `${plan.base}/api/v1/remove`]],
    ['v1-url', [...bearer, ...json, '-d', JSON.stringify({ image_url: plan.url, size: 'full' }), `${plan.base}/api/v1/remove`]],
    ['v1-b64', [...bearer, ...json, '--data-binary', `@${b64Json}`, `${plan.base}/api/v1/remove`]],
    ['removebg-file', [...apiKey, '-F', `image_file=${img}`, '-F', 'size=auto', `${plan.base}/v1.0/removebg`]],
    ['removebg-url', [...apiKey, '-F', `image_url=${plan.url}`, '-F', 'size=auto', `${plan.base}/v1.0/removebg`]],
    ['removebg-b64', [...apiKey, '--data-urlencode', `image_file_b64@${b64}`, '-d', 'size=auto', `${plan.base}/v1.0/removebg`]],
    ['rembg-file', [...apiKey, '-F', `file=${img}`, `${plan.base}/api/remove`]],
    ['rembg-url', [...apiKey, '-G', '--data-urlencode', `url=${plan.url}`, `${plan.base}/api/remove`]],
    ['photoroom-file', ['-H', `x-api-key: ${plan.key}`, '-F', `image_file=${img}`, '-F', 'format=webp', `${plan.base}/v1/segment`]],
    ['clipdrop-file', ['-H', `x-api-key: ${plan.key}`, '-F', `image_file=${img}`, `${plan.base}/remove-background/v1`]],
  ];
  const lines: string[] = [];
  for (const [id, args] of requests) {
    const file = path.join(out, id);
    const dump = `${file}.headers`;
    const r = await run('curl', ['-sS', '--max-time', '120', '-D', dump, '-o', file, '-w', '%{http_code}', ...args]);
    if (r.code !== 0) return { ...r, stdout: lines.join('\n') };
    // The last header block (after a 100 Continue).
    const blocks = (await fs.readFile(dump, 'utf8')).split(/\r?\n\r?\n/).filter((b) => b.trim());
    const headers: Record<string, string> = {};
    for (const line of blocks.at(-1)!.split(/\r?\n/).slice(1)) {
      const at = line.indexOf(':');
      if (at > 0) headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
    }
    lines.push(JSON.stringify({ id, status: Number(r.stdout), headers, file }));
  }
  return { code: 0, stdout: lines.join('\n'), stderr: '' };
}

/** What each request's answer must be: its image format, and its door's headers. */
const EXPECTED: Record<string, { format: 'png' | 'webp'; headers: Record<string, RegExp> }> = {};
const CONFIDENCE = /^(0(\.\d+)?|1)$/;
for (const id of ['v1-file', 'v1-url', 'v1-b64']) {
  // size=full was read (the default is a preview, free): 1 credit, X-Cutout-Size full.
  EXPECTED[id] = { format: 'png', headers: { 'x-credits-charged': /^1$/, 'x-credits-remaining': /^\d+$/, 'x-cutout-size': /^full$/, 'x-cutout-confidence': CONFIDENCE } };
}
for (const id of ['removebg-file', 'removebg-url', 'removebg-b64']) {
  // size=auto was read (the default is a 0.25 MP preview, free): the full size, 1 credit.
  EXPECTED[id] = { format: 'png', headers: { 'x-credits-charged': /^1$/, 'x-width': new RegExp(`^${WIDTH}$`), 'x-height': new RegExp(`^${HEIGHT}$`), 'x-type': /^other$/, 'x-cutout-confidence': CONFIDENCE } };
}
for (const id of ['rembg-file', 'rembg-url']) EXPECTED[id] = { format: 'png', headers: { 'x-cutout-confidence': CONFIDENCE } };
// format=webp was read (the default is PNG).
EXPECTED['photoroom-file'] = { format: 'webp', headers: { 'x-uncertainty-score': CONFIDENCE, 'x-cutout-confidence': CONFIDENCE } };
EXPECTED['clipdrop-file'] = { format: 'png', headers: { 'x-credits-consumed': /^1$/, 'x-remaining-credits': /^\d+$/, 'x-cutout-confidence': CONFIDENCE } };

interface Outcome { client: Client; version?: string; missing?: string; run?: Run; lines?: Line[] }

async function exercise(client: Client, index: number): Promise<Outcome> {
  const probe = await run(client.probe[0], client.probe[1]);
  if (probe.code !== 0) return { client, missing: (probe.stderr || probe.stdout).trim().split('\n').at(-1) };
  const out = path.join(work, `out-${index}`);
  await fs.mkdir(out);
  const plan = path.join(out, 'plan.json');
  await fs.writeFile(plan, JSON.stringify({ base: srv.url, key: key.key, image, url: photoUrl, out }));
  const r = await client.run(plan, out);
  const lines = r.stdout.split('\n').filter((l) => l.trim().startsWith('{')).map((l) => JSON.parse(l) as Line);
  return { client, version: probe.stdout.trim().split('\n')[0], run: r, lines };
}

// Two clients at a time (2 cores: the server's model runs beside them).
const outcomes: Outcome[] = new Array(clients.length);
let next = 0;
await Promise.all([0, 1].map(async () => {
  while (next < clients.length) {
    const i = next++;
    outcomes[i] = await exercise(clients[i], i);
  }
}));

for (const outcome of outcomes) {
  const { client } = outcome;
  const missing = outcome.missing === undefined ? null : `${client.name} is not installed (Debian: apt-get install ${client.pkg}): ${outcome.missing}`;
  // Skipped with the package's name, except under CI, where a missing client fails.
  t.test(client.name, { skip: missing !== null && !CI ? missing : false }, async (t) => {
    if (missing !== null) {
      t.fail(missing);
      return;
    }
    t.comment(`${client.name}: ${outcome.version}`);
    t.equal(outcome.run!.code, 0, `the client ran: ${outcome.run!.stderr.slice(-2000)}`);
    const byId = new Map(outcome.lines!.map((l) => [l.id, l]));
    for (const [id, expected] of Object.entries(EXPECTED)) {
      const line = byId.get(id);
      if (!line) {
        t.fail(`${id}: no answer`);
        continue;
      }
      const body = await fs.readFile(line.file);
      t.equal(line.status, 200, `${id}: 200 ${line.status === 200 ? '' : body.toString('utf8').slice(0, 300)}`);
      if (line.status !== 200) continue;
      t.match(await sharp(body).metadata(), { format: expected.format, width: WIDTH, height: HEIGHT, hasAlpha: true }, `${id}: a ${WIDTH}x${HEIGHT} ${expected.format} cutout with alpha`);
      for (const [name, pattern] of Object.entries(expected.headers)) t.match(line.headers[name] ?? '(none)', pattern, `${id}: ${name}`);
    }
  });
}
