/**
 * `npm run test:image`: the container image, built from the repository's own Dockerfile as a user
 * builds it (where Docker Hub cannot be reached, .ci/run stands in for the official `node` images
 * by tag: scripts/docker-standins.sh), then run as an operator runs it (issue 43): the default
 * command answers /readyz, the health check turns healthy, a key made with `docker exec` removes a
 * background over the v1 API and remove.bg's, a read-only root filesystem works, `docker diff`
 * shows nothing written outside /data and /tmp, the CLI writes into a mounted folder, `docker stop`
 * is clean within 10 s, and a setting and a `_FILE` secret given only by the environment take effect.
 *
 * Containers use the host's network and are reached on 127.0.0.1 only.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import sharp from 'sharp';
import { buildImage, docker, dockerOk, removeContainer, requireDocker, ROOT } from '../helpers/docker.js';
import { freePort, until } from '../helpers/process.js';

const TAG = process.env.CUTOUT_IMAGE_TAG ?? 'cutout:test';
const PHOTO = fs.readFileSync(path.join(ROOT, 'test', 'fixtures', 'chelsea.jpg'));
/**
 * docs/deploy.md's SQLite backup command (`docker exec cutout node -e "..."`): the script between
 * its double quotes, as the shell hands it to node.
 */
const BACKUP_ONE_LINER = (() => {
  const line = fs.readFileSync(path.join(ROOT, 'docs', 'deploy.md'), 'utf8').split('\n').find((l) => l.startsWith('docker exec cutout node -e "'));
  if (!line) throw new Error('docs/deploy.md has no "docker exec cutout node -e" backup line');
  return line.slice('docker exec cutout node -e "'.length, line.lastIndexOf('"')).replace(/\\"/g, '"');
})();
const MANIFEST = JSON.parse(fs.readFileSync(path.join(ROOT, 'models', 'isnet-medium.json'), 'utf8')) as { name: string; sha256: string; license: string };

if (requireDocker(t)) {
  t.test('the image builds from the Dockerfile, with its labels, user and health check', async (t) => {
    const seconds = await buildImage(TAG);
    t.comment(`built ${TAG} in ${seconds.toFixed(0)} s`);
    const [info] = JSON.parse(await dockerOk(['image', 'inspect', TAG])) as any[];
    // The issue's budget: the whole image at most 1 GB uncompressed (docker's Size, SI units as
    // `docker images` shows them), base included. Measured here 866 MB on the stand-in base
    // (docs/deploy.md "Figures"); a lost prune step, or the fp32 weights stored once per graph
    // again (352 MB), goes over it.
    const [base] = JSON.parse(await dockerOk(['image', 'inspect', 'node:22-bookworm-slim'])) as any[];
    t.comment(`image ${(info.Size / 1e6).toFixed(0)} MB uncompressed, of which the base node:22-bookworm-slim ${(base.Size / 1e6).toFixed(0)} MB`);
    t.ok(info.Size <= 1e9, `the image is ${(info.Size / 1e6).toFixed(0)} MB uncompressed (at most 1000 MB, the base's ${(base.Size / 1e6).toFixed(0)} MB included)`);
    // Inside it, the fp32 graphs keep one weights file between them (toolchain/shared-weights.ts).
    const cache = await dockerOk(['run', '--rm', '--entrypoint', 'sh', TAG, '-c', 'cd /app/models/cache && for f in *.o1.*.onnx *.weights; do echo "$(stat -c %s "$f") $f"; done']);
    const files = cache.trim().split('\n').map((line) => { const [size, name] = line.split(' '); return { size: Number(size), name }; });
    const weights = files.filter((f) => f.name.endsWith('.weights'));
    t.equal(weights.length, 1, `one fp32 weights file in the image's model cache (${weights.map((f) => f.name).join(', ')})`);
    const graphs = files.filter((f) => /\.o1\.(fp16-to-fp32|side\d+)\.onnx$/.test(f.name));
    t.equal(graphs.length, 3, 'the fp32 graphs for best, fast and balanced');
    t.ok(graphs.every((f) => f.size < 1e6), `each fp32 graph without its weights (${graphs.map((f) => f.size).join(', ')} bytes)`);
    const labels = info.Config.Labels as Record<string, string>;
    for (const key of ['source', 'version', 'revision', 'licenses', 'title', 'description']) t.ok(labels[`org.opencontainers.image.${key}`], `OCI label ${key}`);
    t.equal(labels['io.cutout.model.name'], MANIFEST.name, "the model's name label is the default model's");
    t.equal(labels['io.cutout.model.sha256'], MANIFEST.sha256, "the model's SHA-256 label matches models/isnet-medium.json");
    t.equal(labels['io.cutout.model.license'], MANIFEST.license, "the model's licence label");
    t.equal(info.Config.User, '1000:1000', 'a numeric non-root user');
    t.same(info.Config.Healthcheck.Test, ['CMD', 'cutout', 'health'], 'an exec-form health check through cutout health');
    t.same(info.Config.Cmd, ['serve', '--preload'], 'the default command serves with the model preloaded');
    // Issue 51: the official node:22 images ship npm 10, which ignores package.json's allowScripts
    // and would run onnxruntime-node's NuGet download. The build stage's npm is that npm (the
    // stand-ins carry it too), and no CUDA or TensorRT provider library made it into the image.
    const buildNpm = (await dockerOk(['run', '--rm', '--network', 'none', 'node:22-bookworm', 'npm', '--version'])).trim();
    t.match(buildNpm, /^10\./, `the build stage's npm is the npm of the official node:22 images (${buildNpm})`);
    const providers = await dockerOk(['run', '--rm', '--entrypoint', 'sh', TAG, '-c', "find / -xdev -name 'libonnxruntime_providers_*' 2>/dev/null; true"]);
    t.equal(providers.trim(), '', 'no onnxruntime CUDA/TensorRT provider library in the image');
    // Threads and workers follow the container's CPU limit, not the machine's cores (issue 51).
    const limited = await dockerOk(['run', '--rm', '--network', 'none', '--cpus', '1', '--entrypoint', 'node', TAG, '--input-type=module', '-e', "const m = await import('/app/dist/container-limits.js'); console.log(m.usableCores(), m.cgroupCpuLimit())"]);
    t.equal(limited.trim(), '1 1', `under docker run --cpus 1: one core to use, a quota of 1 CPU (${limited.trim()})`);
  });

  t.test('docker run: ready, healthy, keys by docker exec, v1 and remove.bg removals, read-only, clean stop', async (t) => {
    const name = `cutout-test-${process.pid}`;
    t.teardown(() => removeContainer(name));
    const port = await freePort();
    const started = Date.now();
    // CUTOUT_PORT given only by the environment moves the server (a setting from the environment).
    await dockerOk(['run', '-d', '--name', name, '--network', 'host', '--read-only', '--tmpfs', '/tmp', '-e', `CUTOUT_PORT=${port}`, TAG]);
    const base = `http://127.0.0.1:${port}`;
    const ready = await until('readyz 200', async () => (await fetch(`${base}/readyz`).catch(() => null))?.status === 200, 120_000);
    t.ok(ready, `/readyz answered 200 ${((Date.now() - started) / 1000).toFixed(1)} s after docker run, on the port CUTOUT_PORT named`);
    const logs = await docker(['logs', name]);
    t.match(logs.stderr, /cutout serve: data directory \/data; store sqlite \/data\/cutout\.db/, 'serve names its data directory and store');
    t.match(logs.stdout, /^listening on http:\/\/0\.0\.0\.0:\d+/, 'the listening line first on stdout');

    const health = await until('healthy', async () => (await dockerOk(['inspect', '-f', '{{.State.Health.Status}}', name])).trim() === 'healthy', 90_000);
    t.ok(health, 'the HEALTHCHECK (cutout health) turned healthy');

    const created = JSON.parse(await dockerOk(['exec', name, 'cutout', 'keys', 'create', '--json'])) as { key: string; credits: number };
    t.match(created.key, /^cut_live_/, 'docker exec cutout keys create made a key on the server\'s store');
    const v1Form = new FormData();
    v1Form.append('image_file', new Blob([PHOTO]), 'photo.jpg');
    const v1 = await fetch(`${base}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${created.key}` }, body: v1Form });
    t.equal(v1.status, 200, 'v1 POST /api/v1/remove with that key');
    const v1Png = await sharp(Buffer.from(await v1.arrayBuffer())).metadata();
    t.equal(v1Png.channels, 4, 'and the cutout has an alpha channel');

    const rbForm = new FormData();
    rbForm.append('image_file', new Blob([PHOTO]), 'photo.jpg');
    rbForm.append('size', 'preview');
    const rb = await fetch(`${base}/v1.0/removebg`, { method: 'POST', headers: { 'X-Api-Key': created.key }, body: rbForm });
    t.equal(rb.status, 200, "remove.bg's POST /v1.0/removebg with the same key");
    t.match(rb.headers.get('content-type') ?? '', /^image\//, 'answers an image');

    // docs/deploy.md "Backups": the image has no sqlite3 program; its Node and sqlite3 module make a
    // consistent copy while the server runs (VACUUM INTO), which then opens with the key in it.
    await dockerOk(['exec', name, 'node', '-e', BACKUP_ONE_LINER]);
    const keysInBackup = await dockerOk(['exec', name, 'node', '-e', "new (require('/app/node_modules/sqlite3').Database)('/data/cutout-backup.db').get('SELECT count(*) AS n FROM api_keys', (e, r) => { if (e) throw e; console.log(r.n) })"]);
    t.equal(keysInBackup.trim(), '1', 'the backup made by the documented command holds the key made above');

    const stopStarted = Date.now();
    await dockerOk(['stop', '-t', '10', name], { timeoutMs: 30_000 });
    const stopSeconds = (Date.now() - stopStarted) / 1000;
    const state = JSON.parse(await dockerOk(['inspect', '-f', '{{json .State}}', name])) as { ExitCode: number; OOMKilled: boolean };
    t.equal(state.ExitCode, 0, 'docker stop: exit code 0 (SIGTERM reached the server through tini)');
    t.ok(stopSeconds < 10, `docker stop took ${stopSeconds.toFixed(1)} s (under 10)`);
  });

  t.test('a writable root filesystem: settings and a _FILE secret from the environment, nothing written outside /data and /tmp', async (t) => {
    const name = `cutout-test-env-${process.pid}`;
    t.teardown(() => removeContainer(name));
    const secrets = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-secrets-'));
    t.teardown(() => fs.rmSync(secrets, { recursive: true, force: true }));
    const secretFile = path.join(secrets, 'marketplace');
    // As `docker secret` and Kubernetes write them: the value and a trailing newline.
    fs.writeFileSync(secretFile, 'proxy-secret-42\n', { mode: 0o644 });
    const port = await freePort();
    await dockerOk(['run', '-d', '--name', name, '--network', 'host', '-e', `CUTOUT_PORT=${port}`, '-e', 'CUTOUT_RATE_LIMIT=2',
      '-e', 'CUTOUT_MARKETPLACE_SECRET_FILE=/run/secrets/marketplace', '-v', `${secretFile}:/run/secrets/marketplace:ro`, TAG]);
    const base = `http://127.0.0.1:${port}`;
    await until('readyz 200', async () => (await fetch(`${base}/readyz`).catch(() => null))?.status === 200, 120_000);

    const marketplace = (secret: string) => fetch(`${base}/api/v1/account`, { headers: { 'X-Marketplace-Proxy-Secret': secret, 'X-Marketplace-User': 'user-1' } });
    t.equal((await marketplace('proxy-secret-42')).status, 200, 'CUTOUT_MARKETPLACE_SECRET_FILE: the secret read from the file (its newline dropped) lets the proxy in');
    t.equal((await marketplace('wrong')).status, 401, 'and a wrong secret does not');

    const { key } = JSON.parse(await dockerOk(['exec', name, 'cutout', 'keys', 'create', '--json'])) as { key: string };
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await fetch(`${base}/api/v1/account`, { headers: { Authorization: `Bearer ${key}` } })).status);
    t.same(statuses, [200, 200, 429], 'CUTOUT_RATE_LIMIT=2 from the environment: the third request in the minute is refused');

    const sync = new FormData();
    sync.append('image_file', new Blob([PHOTO]), 'photo.jpg');
    const { key: second } = JSON.parse(await dockerOk(['exec', name, 'cutout', 'keys', 'create', '--json'])) as { key: string };
    t.equal((await fetch(`${base}/api/v1/remove`, { method: 'POST', headers: { Authorization: `Bearer ${second}` }, body: sync })).status, 200, 'a removal (the model read from the image, results written to /data)');

    const diff = (await dockerOk(['diff', name])).split('\n').filter(Boolean);
    // Docker's own mount points (the secret's file and its folders) are not the server's writes.
    const mounts = (JSON.parse(await dockerOk(['inspect', '-f', '{{json .Mounts}}', name])) as { Destination: string }[]).map((m) => m.Destination);
    const isMountPoint = (p: string) => mounts.some((m) => m === p || m.startsWith(p + '/'));
    const outside = diff.filter((line) => !/^[ACD] \/(data|tmp)(\/|$)/.test(line) && !isMountPoint(line.slice(2)));
    t.same(outside, [], `docker diff: nothing written outside /data and /tmp (${diff.length} change(s) in all)`);
    await dockerOk(['stop', '-t', '10', name], { timeoutMs: 30_000 });
  });

  t.test('the CLI: docker run -v "$PWD:/work" -w /work cutout photo.jpg writes the cutout beside it', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-work-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    // The container's user (1000) writes into the folder, as a user's own folder of uid 1000 allows.
    fs.chmodSync(dir, 0o777);
    fs.writeFileSync(path.join(dir, 'photo.jpg'), PHOTO);
    const r = await docker(['run', '--rm', '--network', 'none', '-v', `${dir}:/work`, '-w', '/work', TAG, 'photo.jpg'], { timeoutMs: 120_000 });
    t.equal(r.status, 0, `the CLI exited 0${r.status ? `: ${r.stderr}` : ''}`);
    const out = path.join(dir, 'photo.cutout.png');
    t.ok(fs.existsSync(out), 'photo.cutout.png written into the mounted folder');
    if (fs.existsSync(out)) {
      const meta = await sharp(out).metadata();
      t.equal(meta.format, 'png', 'a PNG');
      t.equal(meta.channels, 4, 'with alpha');
    }
  });

  t.test('every quality and precision runs from the model files in the image, on a read-only root (nothing built at run time)', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cutout-work-'));
    t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
    fs.chmodSync(dir, 0o777);
    fs.writeFileSync(path.join(dir, 'photo.jpg'), PHOTO);
    // fast and balanced read the graphs whose weights are in the shared file; int8 its own files.
    for (const [quality, precision] of [['fast', 'fp32'], ['balanced', 'fp32'], ['best', 'fp32'], ['balanced', 'int8'], ['best', 'int8']]) {
      const out = `${quality}-${precision}.png`;
      const r = await docker(['run', '--rm', '--network', 'none', '--read-only', '--tmpfs', '/tmp', '-v', `${dir}:/work`, '-w', '/work', TAG,
        'photo.jpg', '--quality', quality, '--precision', precision, '--out', out], { timeoutMs: 120_000 });
      t.equal(r.status, 0, `--quality ${quality} --precision ${precision} exited 0${r.status ? `: ${r.stderr}` : ''}`);
      t.ok(fs.existsSync(path.join(dir, out)) && (await sharp(path.join(dir, out)).metadata()).channels === 4, `${out}: a cutout with alpha`);
    }
  });
}
