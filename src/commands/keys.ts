/**
 * `cutout keys create|list|revoke`: API keys. A key is printed once, at creation; the store keeps
 * only its sha256. Without --account, create opens a new account with the free credits.
 */
import type { Command } from 'commander';
import { loadConfig } from '../config.js';
import type { Store } from '../store/db.js';

export interface StoreFlags { data?: string; config?: string; store?: string }

/** Opens the configured store (SQLite in the data directory, or --store URL) for one command, closing it afterwards. */
export async function withStore<T>(flags: StoreFlags, fn: (store: Store) => Promise<T>): Promise<T> {
  const config = await loadConfig({ dataDir: flags.data, store: flags.store }, { configFile: flags.config });
  const { openStore } = await import('../store/db.js');
  const store = await openStore(config.dataDir, { url: config.store });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

function addStoreOptions(command: Command): Command {
  return command
    .option('--data <dir>', 'data directory (default: $CUTOUT_HOME or ~/.cutout)')
    .option('--config <file>', 'config file (default: found by cosmiconfig, module name "cutout")');
}

/** `--store URL`, for the commands that read or write accounts, keys, credits, jobs or results. */
export const STORE_FLAG_HELP = 'where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet (env CUTOUT_STORE; default: SQLite in the data directory)';

function addStoreUrlOptions(command: Command): Command {
  return addStoreOptions(command).option('--store <url>', STORE_FLAG_HELP);
}

export { addStoreOptions, addStoreUrlOptions };

export function registerKeys(program: Command): void {
  const keys = program.command('keys').description('create, list and revoke API keys');

  addStoreUrlOptions(
    keys
      .command('create')
      .description('create an API key and print it once (a new account gets the free credits)')
      .option('--name <text>', 'a label for the key')
      .option('--test', 'a cut_test_ key: never charged, results capped to preview size')
      .option('--account <id>', 'add the key to this account instead of opening a new one')
      .option('--json', 'print {"id", "key", "account", "credits"}'),
  ).action(async (flags: StoreFlags & { name?: string; test?: boolean; account?: string; json?: boolean }) => {
    const created = await withStore(flags, (store) => store.createKey({ name: flags.name ?? null, test: flags.test === true, accountId: flags.account ?? null }));
    if (flags.json) {
      process.stdout.write(JSON.stringify(created) + '\n');
      return;
    }
    process.stdout.write(`${created.key}\n`);
    process.stderr.write(`key id ${created.id}, account ${created.account}, balance ${created.credits} credits. The key is shown only now: keep it safe.\n`);
  });

  addStoreUrlOptions(
    keys.command('list').description('list keys (ids, names, hints; never the keys)').option('--json', 'one JSON object per key'),
  ).action(async (flags: StoreFlags & { json?: boolean }) => {
    const list = await withStore(flags, (store) => store.listKeys());
    for (const k of list) {
      if (flags.json) {
        process.stdout.write(JSON.stringify({ id: k.id, account: k.accountId, name: k.name, test: k.test, hint: k.hint, created_at: k.createdAt, revoked_at: k.revokedAt }) + '\n');
      } else {
        const state = k.revokedAt ? `revoked ${k.revokedAt}` : 'active';
        process.stdout.write(`${k.id}  ${k.test ? 'test' : 'live'}  ...${k.hint}  ${k.accountId}  ${state}  ${k.name ?? ''}\n`);
      }
    }
  });

  addStoreUrlOptions(keys.command('revoke').description('revoke a key by its id').argument('<id>', 'key id (key_...)')).action(
    async (id: string, flags: StoreFlags) => {
      const revoked = await withStore(flags, (store) => store.revokeKey(id));
      process.stdout.write(revoked ? `revoked ${id}\n` : `${id} was already revoked\n`);
    },
  );
}
