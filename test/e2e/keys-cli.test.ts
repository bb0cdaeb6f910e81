/** `cutout keys|credits|account|usage` through the real binary, on a temporary data directory. */
import t from 'tap';
import os from 'node:os';
import { openStore } from '../../src/store/db.js';
import { runCli } from '../helpers/cli.js';
import { tempDataDir } from '../helpers/api-server.js';

const json = (b: Buffer) => JSON.parse(b.toString());

t.test('keys create, list, revoke; credits add; account and usage', async (t) => {
  const data = await tempDataDir(t);
  const cli = (...args: string[]) => runCli([...args, '--data', data]);

  const created = await cli('keys', 'create', '--name', 'shop', '--json');
  t.equal(created.code, 0, created.stderr);
  const live = json(created.stdout);
  t.same(Object.keys(live).sort(), ['account', 'credits', 'id', 'key']);
  t.match(live, { id: /^key_/, key: /^cut_live_[A-Za-z0-9_-]{32}$/, account: /^acct_/, credits: 10 });

  const plain = await cli('keys', 'create', '--test', '--account', live.account);
  t.equal(plain.code, 0);
  t.match(plain.stdout.toString(), /^cut_test_\S+\n$/, 'without --json: the key alone on stdout');
  t.match(plain.stderr, /shown only now/);

  const listed = (await cli('keys', 'list', '--json')).stdout.toString().trim().split('\n').map((l) => JSON.parse(l));
  t.equal(listed.length, 2);
  t.match(listed[0], { id: live.id, account: live.account, name: 'shop', test: false, hint: live.key.slice(-4), revoked_at: null });
  t.match(listed[1], { account: live.account, test: true });
  t.notOk(JSON.stringify(listed).includes(live.key), 'the key itself is never listed');

  const add = await cli('credits', 'add', live.id, '25', '--json');
  t.equal(add.code, 0, add.stderr);
  t.same(json(add.stdout), { account: live.account, balance: 35 });
  t.equal((await cli('credits', 'add', live.account, 'ten')).code, 2, 'a bad amount is a usage error');
  t.equal((await cli('credits', 'add', 'acct_nope', '5')).code, 2, 'an unknown account is refused');

  const account = await cli('account', '--key', live.key, '--json');
  t.match(json(account.stdout), { account_id: live.account, balance: 35, plan: 'paid', credits_used_this_month: 0, test: false });
  const local = await cli('account', '--json');
  t.match(json(local.stdout), { account_id: null, plan: 'local', balance: 0 });
  const usage = json((await cli('usage', '--key', live.key, '--json')).stdout);
  t.equal(usage.days.length, 30);
  t.equal(usage.days[0].date, new Date().toISOString().slice(0, 10));

  t.equal((await cli('keys', 'revoke', live.id)).code, 0);
  const again = await cli('keys', 'revoke', live.id);
  t.match(again.stdout.toString(), /already revoked/);
  t.equal((await cli('keys', 'revoke', 'key_nope')).code, 2);
  const refused = await cli('account', '--key', live.key);
  t.equal(refused.code, 2, 'a revoked key is refused as a bad flag value, as by cutout remove --key');
  t.match(refused.stderr, /revoked/);
});

t.test('keys create takes --expires-at, --rate-limit and --label; list shows them; every change is in the audit trail', async (t) => {
  const data = await tempDataDir(t);
  const cli = (...args: string[]) => runCli([...args, '--data', data]);
  const made = await cli('keys', 'create', '--name', 'acme', '--expires-at', '2027-01-31T00:00:00Z', '--rate-limit', '5', '--label', 'team=web', '--label', 'tier=gold', '--json');
  t.equal(made.code, 0, made.stderr);
  const key = json(made.stdout);
  const line = JSON.parse(made.stderr.trim().split('\n').pop()!);
  const actor = `cli:${os.userInfo().username}`;
  t.match(line, { level: 'info', msg: 'audit event', audit: { actor, action: 'key.create', target: key.id, outcome: 'ok', detail: { rate_limit: 5 } } }, 'one JSON line on stderr');
  t.notOk(made.stderr.includes(key.key), 'never the secret in the line');

  const listed = JSON.parse((await cli('keys', 'list', '--json')).stdout.toString());
  t.match(listed, { id: key.id, mode: 'live', expires_at: '2027-01-31T00:00:00.000Z', rate_limit: 5, labels: { team: 'web', tier: 'gold' }, revoked_at: null });
  const text = (await cli('keys', 'list')).stdout.toString();
  t.match(text, /active {2}expires 2027-01-31T00:00:00.000Z {2}5\/min {2}team=web {2}tier=gold {2}acme/);

  for (const bad of [['--expires-at', '2027-01-31'], ['--rate-limit', '0'], ['--label', 'novalue']]) {
    const refused = await cli('keys', 'create', ...bad);
    t.equal(refused.code, 2, `${bad.join(' ')}: a usage error`);
    t.match(refused.stderr, new RegExp(bad[0]));
  }
  const old = json((await cli('keys', 'create', '--expires-at', '2020-01-01T00:00:00Z', '--account', key.account, '--json')).stdout);
  const expired = await cli('account', '--key', old.key);
  t.equal(expired.code, 2, 'an expired --key is a bad flag value, as a revoked one');
  t.match(expired.stderr, /--key: This API key expired at 2020-01-01T00:00:00.000Z/);
  t.match((await cli('keys', 'list')).stdout.toString(), /expired 2020-01-01/);
  t.equal((await cli('credits', 'add', key.account, '7', '--reason', 'invoice 12')).code, 0);
  t.equal((await cli('keys', 'revoke', key.id)).code, 0);
  t.match((await cli('keys', 'list')).stdout.toString(), /revoked /);

  const store = await openStore(data);
  t.teardown(() => store.close());
  const { events } = await store.audit.list({ limit: 10 });
  t.same(events.map((e) => [e.actor, e.action, e.target, e.outcome]), [
    [actor, 'key.create', key.id, 'ok'],
    [actor, 'key.create', old.id, 'ok'],
    [actor, 'credits.add', key.account, 'ok'],
    [actor, 'key.revoke', key.id, 'ok'],
  ], 'the refused flags changed nothing and recorded nothing');
  t.match(events[2].detail, { amount: 7, reason: 'invoice 12', balance: 17 });
  const note = await store.db.get<{ note: string }>("SELECT note FROM ledger WHERE reason = 'purchase'");
  t.equal(note?.note, 'invoice 12', 'the reason is kept with the ledger row');
});
