/**
 * The store commands on PostgreSQL: `--store URL` or CUTOUT_STORE on keys, credits, account,
 * usage and `remove --key`, against a real embedded PostgreSQL; a bad URL is a one-line usage
 * error, an unreachable database a one-line failure, neither showing the password.
 */
import t from 'tap';
import path from 'node:path';
import { FIXTURES, runCli } from '../helpers/cli.js';
import { storeUrl, tempDir } from '../helpers/stores.js';

t.test('keys, credits, account, usage and remove --key share one PostgreSQL store', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const data = await tempDir(t, 'cutout-cli-pg-');
  const cli = (args: string[], env: Record<string, string> = {}) => runCli([...args, '--data', data], { env });

  const created = await cli(['keys', 'create', '--json', '--name', 'fleet', '--store', url]);
  t.equal(created.code, 0, created.stderr);
  const key = JSON.parse(created.stdout.toString());
  t.equal(key.credits, 10);
  const listed = await cli(['keys', 'list', '--json'], { CUTOUT_STORE: url });
  t.equal(listed.code, 0, listed.stderr);
  const lines = (text: Buffer) => text.toString().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  t.same(lines(listed.stdout).map((k: any) => k.id), [key.id], 'CUTOUT_STORE selects the same database');
  const local = await cli(['keys', 'list', '--json']);
  t.same(lines(local.stdout), [], 'without it: the SQLite store of the data directory, empty');

  t.equal((await cli(['credits', 'add', key.id, '5', '--store', url])).code, 0);
  const out = path.join(data, 'cat.png');
  const removed = await cli(['remove', path.join(FIXTURES, 'chelsea.jpg'), '-o', out, '--quality', 'fast', '--key', key.key, '--store', url, '--json']);
  t.equal(removed.code, 0, removed.stderr);
  const account = await cli(['account', '--key', key.key, '--json', '--store', url]);
  t.match(JSON.parse(account.stdout.toString()), { account_id: key.account, balance: 14, plan: 'paid', credits_used_this_month: 1 });
  const usage = await cli(['usage', '--key', key.key, '--json', '--store', url]);
  const today = JSON.parse(usage.stdout.toString()).days[0];
  t.match(today, { date: new Date().toISOString().slice(0, 10), credits: 1, requests: 1 });
  t.equal((await cli(['keys', 'revoke', key.id, '--store', url])).code, 0);
  const after = await cli(['account', '--key', key.key, '--store', url]);
  t.not(after.code, 0, 'a revoked key is refused');
});

t.test('a bad or unreachable store is one line, without the password', async (t) => {
  const data = await tempDir(t, 'cutout-cli-pg-');
  const bad = await runCli(['keys', 'list', '--data', data, '--store', 'mysql://root:hunter2@db/x']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /^cutout: Expected a postgres:\/\/ or postgresql:\/\/ URL for store/);
  t.notMatch(bad.stderr, /hunter2/);
  t.equal(bad.stderr.trim().split('\n').length, 1);
  const down = await runCli(['usage', '--data', data, '--store', 'postgres://app:hunter2@127.0.0.1:1/cutout']);
  t.equal(down.code, 1);
  t.match(down.stderr, /^cutout: Cannot open the store postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/cutout: /);
  t.notMatch(down.stderr, /hunter2/);
  t.equal(down.stderr.trim().split('\n').length, 1);
});

t.test('remove --key with a refused key on PostgreSQL exits at once: the store is closed on the error path too', async (t) => {
  const url = (await storeUrl('postgres'))!;
  const data = await tempDir(t, 'cutout-cli-pg-');
  const started = Date.now();
  const refused = await runCli(['remove', path.join(FIXTURES, 'chelsea.jpg'), '-o', path.join(data, 'x.png'), '--key', 'ck_live_not_a_key', '--store', url, '--data', data]);
  t.equal(refused.code, 2, 'a usage error');
  t.match(refused.stderr, /--key: invalid or revoked API key/);
  // An open pool keeps a process alive until its idle connections time out (10 s in pg).
  t.ok(Date.now() - started < 8_000, `exited without waiting for the pool (${Date.now() - started} ms)`);
});
