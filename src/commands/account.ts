/**
 * `cutout account` and `cutout usage`: what GET /api/v1/account and /api/v1/usage report, for the
 * account of --key, or for the local CLI runs without it.
 */
import type { Command } from 'commander';
import type { Store } from '../store/db.js';
import { accountBody } from '../store/ledger.js';
import { withStore, type StoreFlags } from './keys.js';
import { addSettingFlags } from './setting-flags.js';
import { CutoutError } from '../errors.js';
import { UsageError } from './usage-error.js';

type KeyFlags = StoreFlags & { key?: string; json?: boolean };

async function callerOf(store: Store, key: string | undefined): Promise<{ accountId: string | null; test: boolean }> {
  if (key === undefined) return { accountId: null, test: false };
  // A bad --key is a bad flag value: exit code 2, with the same message as `cutout remove --key`.
  const auth = await store.keys.authenticate(key).catch((err: unknown) => {
    throw err instanceof CutoutError && err.reason === 'key_expired' ? new UsageError(`--key: ${err.message}`) : err;
  });
  if (!auth) throw new UsageError('--key: invalid or revoked API key');
  return { accountId: auth.accountId, test: auth.test };
}

export function registerAccount(program: Command): void {
  addSettingFlags(
    program
      .command('account')
      .description('balance, plan and credits used this month (of --key\'s account, else of local runs)')
      .option('--key <api_key>', 'the account of this key')
      .option('--json', 'the JSON of GET /api/v1/account'),
    'account',
  ).action(async (flags: KeyFlags) => {
    const body = await withStore(flags, async (store) => {
      const caller = await callerOf(store, flags.key);
      const info = await store.ledger.account(caller.accountId);
      return { ...accountBody(info, caller.test), requests_this_month: info.requestsThisMonth };
    }, 'account');
    if (flags.json) {
      process.stdout.write(JSON.stringify(body) + '\n');
      return;
    }
    process.stdout.write(
      `account:  ${body.account_id ?? 'local runs (no key)'}\nplan:     ${body.plan}${body.test ? ' (test key)' : ''}\nbalance:  ${body.balance} credits\n` +
        `this month: ${body.credits_used_this_month} credits, ${body.requests_this_month} requests\n`,
    );
  });

  addSettingFlags(
    program
      .command('usage')
      .description('credits and requests per day for the last 30 days, newest first')
      .option('--key <api_key>', 'the account of this key')
      .option('--json', 'the JSON of GET /api/v1/usage'),
    'usage',
  ).action(async (flags: KeyFlags) => {
    const days = await withStore(flags, async (store) => store.ledger.usage((await callerOf(store, flags.key)).accountId), 'usage');
    if (flags.json) {
      process.stdout.write(JSON.stringify({ days }) + '\n');
      return;
    }
    process.stdout.write('date        credits  requests\n');
    for (const d of days) process.stdout.write(`${d.date}  ${String(d.credits).padStart(7)}  ${String(d.requests).padStart(8)}\n`);
  });
}
