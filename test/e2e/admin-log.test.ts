/**
 * The audit trail's JSON lines from the real `cutout serve` (a child process, its stdout read):
 * one line per event beside the request's own line, with the request id, never a secret; the
 * admin token read from CUTOUT_ADMIN_TOKEN_FILE, as a Kubernetes Secret mounts it.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { bearer, startServe, tempDataDir } from '../helpers/api-server.js';

t.test('each admin event is one JSON line on stdout, with its request id; the token comes from a file', async (t) => {
  const token = crypto.randomBytes(24).toString('base64url');
  const dir = await tempDataDir(t);
  const file = path.join(dir, 'admin-token');
  await fs.writeFile(file, `${token}\n`);
  const srv = await startServe(t, [], { env: { CUTOUT_ADMIN_TOKEN_FILE: file } });
  let out = '';
  srv.child.stdout!.on('data', (d: Buffer) => (out += d.toString()));

  const made = await fetch(`${srv.url}/api/v1/admin/keys`, {
    method: 'POST', headers: { ...bearer(token), 'Content-Type': 'application/json', 'X-Request-Id': 'audit-line-1' }, body: JSON.stringify({ name: 'acme', rate_limit: 9 }),
  });
  t.equal(made.status, 201, 'the token from the file is the admin token');
  const { key, id } = await made.json() as { key: string; id: string };
  const refused = await fetch(`${srv.url}/api/v1/admin/audit`, { headers: { ...bearer(key), 'X-Request-Id': 'audit-line-2' } });
  t.equal(refused.status, 403);

  const deadline = Date.now() + 5000;
  const lines = () => out.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  while (lines().filter((l) => l.audit).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const audit = lines().filter((l) => l.audit);
  t.equal(audit.length, 2, 'one line per event');
  t.match(audit[0], { level: 'info', msg: 'audit event', requestId: 'audit-line-1', server: String, audit: { actor: 'admin', action: 'key.create', target: id, outcome: 'ok', detail: { rate_limit: 9 } } });
  t.match(audit[1], { requestId: 'audit-line-2', audit: { actor: `key:${id}`, action: 'audit.list', outcome: 'refused', detail: { status: 403, reason: 'not_admin' } } });
  t.equal(lines().filter((l) => l.requestId === 'audit-line-1' && !l.audit).length, 1, "the request's own line too");
  t.notOk(out.includes(key) || out.includes(token), 'neither the key nor the token is logged');
});
