/**
 * Fast lane (docs/testing.md): the server runs in this process (startApi) on the stand-in model;
 * what follows of `cutout serve` and the real model is what `npm run test:s3-results` runs.
 *
 * The callback receiver of docs/http-api.md works by copy and paste (issue 37): its code block,
 * as the docs print it, runs against a real `cutout serve`, reads the secret from the server's
 * own `callback-secret` file, accepts the signed callback of a real job and refuses a forged one.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { ROOT, FIXTURES } from './helpers/cli.js';
import { bearer, createKey, startApi, tempDataDir, upload } from './helpers/api-server.js';
import { freePort, until } from './helpers/process.js';

function receiverFromDocs(): string {
  const doc = fs.readFileSync(path.join(ROOT, 'docs', 'http-api.md'), 'utf8');
  const at = doc.indexOf('A receiver that checks the signature');
  if (at < 0) throw new Error('docs/http-api.md has no receiver section');
  const block = /```js\n([\s\S]*?)```/.exec(doc.slice(at));
  if (!block) throw new Error('no js block after the receiver section');
  return block[1];
}

t.test('the docs receiver verifies a real callback with the secret read from its file', async (t) => {
  const srv = await startApi(t, ['--workers', '1', '--allow-private-network'], { env: { CUTOUT_CALLBACK_SECRET: '' } });
  const key = await createKey(srv.dataDir);
  const secretFile = path.join(srv.dataDir, 'callback-secret');
  // The server generates its secret when it starts; the file is what an operator copies.
  await until('the secret file', async () => fs.existsSync(secretFile), 20_000);

  const dir = await tempDataDir(t);
  const script = path.join(dir, 'receiver.mjs');
  fs.writeFileSync(script, receiverFromDocs());
  const port = await freePort();
  const receiver = spawn(process.execPath, [script], {
    cwd: dir,
    env: { ...process.env, NODE_OPTIONS: '', CUTOUT_CALLBACK_SECRET: '', SECRET_FILE: secretFile, CUTOUT_URL: srv.url, CUTOUT_KEY: key.key, PORT: String(port) },
  });
  t.teardown(() => { receiver.kill('SIGKILL'); });
  let out = '';
  let err = '';
  receiver.stdout.on('data', (d: Buffer) => (out += d.toString()));
  receiver.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const hook = `http://127.0.0.1:${port}/`;

  // A forged signature is refused (this also waits for the receiver to listen).
  const forged = await until('the receiver to listen', () =>
    fetch(hook, { method: 'POST', headers: { 'X-Service-Signature': `sha256=${'0'.repeat(64)}` }, body: '{"job_id":"x"}' }).catch(() => null),
    20_000);
  t.equal(forged.status, 401, 'a forged callback is refused');

  const res = await fetch(`${srv.url}/api/v1/jobs`, {
    method: 'POST',
    headers: bearer(key.key, { 'X-Callback-Url': hook }),
    body: upload(fs.readFileSync(path.join(FIXTURES, 'chelsea.jpg')), { size: 'preview', quality: 'fast' }),
  });
  t.equal(res.status, 202, 'job queued');
  const { job_id } = (await res.json()) as { job_id: string };
  const ready = await until('the receiver to confirm the job', async () => /^ready: (\S+)$/m.exec(out), 90_000);
  t.equal(ready[1], `${srv.url}/api/v1/results/${job_id}`, 'the receiver verified the signature and fetched the job');
  t.match(out, /refused: bad signature/, 'and refused the forged one');
  t.equal(err, '', 'nothing on the receiver\'s stderr');
});
