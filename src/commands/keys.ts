/**
 * `cutout keys create|list|revoke`: API keys. A key is printed once, at creation; the store keeps
 * only its sha256. Without --account, create opens a new account with the free credits.
 */
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import type { Store } from '../store/db.js';
import type { CommandName } from '../settings.js';
import { addSettingFlags, flagsGiven } from './setting-flags.js';

/** The setting flags of the store commands (--data, --config, --store: the settings table). */
export interface StoreFlags { data?: string; config?: string; store?: string }

/** Opens the configured store (SQLite in the data directory, or --store URL) for one command, closing it afterwards. */
export async function withStore<T>(flags: StoreFlags, fn: (store: Store) => Promise<T>, which: CommandName = 'keys'): Promise<T> {
  const config = await loadConfig(flagsGiven(null, flags as Record<string, unknown>, which));
  const { openStore } = await import('../store/db.js');
  const store = await openStore(config.dataDir, { url: config.store });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('create, list and revoke API keys');

  addSettingFlags(
    keys
      .command('create')
      .description('create an API key and print it once (a new account gets the free credits)')
      .option('--name <text>', 'a label for the key')
      .option('--test', 'a cut_test_ key: never charged, results capped to preview size')
      .option('--account <id>', 'add the key to this account instead of opening a new one')
      .option('--json', 'print {"id", "key", "account", "credits"}'),
    'keys',
  ).action(async (flags: StoreFlags & { name?: string; test?: boolean; account?: string; json?: boolean }) => {
    const created = await withStore(flags, (store) => store.keys.create({ name: flags.name ?? null, test: flags.test === true, accountId: flags.account ?? null }));
    if (flags.json) {
      process.stdout.write(JSON.stringify(created) + '\n');
      return;
    }
    process.stdout.write(`${created.key}\n`);
    process.stderr.write(`key id ${created.id}, account ${created.account}, balance ${created.credits} credits. The key is shown only now: keep it safe.\n`);
  });

  addSettingFlags(
    keys.command('list').description('list keys (ids, names, hints; never the keys)').option('--json', 'one JSON object per key'),
    'keys',
  ).action(async (flags: StoreFlags & { json?: boolean }) => {
    const list = await withStore(flags, (store) => store.keys.list());
    for (const k of list) {
      if (flags.json) {
        process.stdout.write(JSON.stringify({ id: k.id, account: k.accountId, name: k.name, test: k.test, hint: k.hint, created_at: k.createdAt, revoked_at: k.revokedAt }) + '\n');
      } else {
        const state = k.revokedAt ? `revoked ${k.revokedAt}` : 'active';
        process.stdout.write(`${k.id}  ${k.test ? 'test' : 'live'}  ...${k.hint}  ${k.accountId}  ${state}  ${k.name ?? ''}\n`);
      }
    }
  });

  addSettingFlags(keys.command('revoke').description('revoke a key by its id').argument('<id>', 'key id (key_...)'), 'keys').action(
    async (id: string, flags: StoreFlags) => {
      const revoked = await withStore(flags, (store) => store.keys.revoke(id));
      process.stdout.write(revoked ? `revoked ${id}\n` : `${id} was already revoked\n`);
    },
  );
}
