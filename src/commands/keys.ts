/**
 * `cutout keys create|list|revoke`: API keys. A key is printed once, at creation; the store keeps
 * only its sha256. Without --account, create opens a new account with the free credits. A key may
 * expire (`--expires-at`), have a rate limit of its own (`--rate-limit`) and labels (`--label`),
 * the fields of the admin API (key-fields.ts parses both). Every change is in the audit trail
 * under `cli:<os user>` (audit-trail.ts), with its JSON line on stderr.
 */
import type { Command } from 'commander';
import { cliActor } from '../audit-trail.js';
import { loadConfig } from '../config.js';
import { labelsOfFlags, parseExpiresAt, parseRateLimit } from '../key-fields.js';
import type { KeyInfo, Store } from '../store/db.js';
import { keyBody } from '../store/ledger.js';
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
      .option('--expires-at <time>', 'refuse the key from this time on (ISO 8601 with its zone, 2027-01-31T00:00:00Z)')
      .option('--rate-limit <n>', "the key's own requests per minute, in place of the server's --rate-limit")
      .option('--label <name=value>', 'a label of the key (repeat for more)', collect, [] as string[])
      .option('--json', 'print {"id", "key", "account", "credits"}'),
    'keys',
  ).action(async (flags: StoreFlags & { name?: string; test?: boolean; account?: string; json?: boolean; expiresAt?: string; rateLimit?: string; label: string[] }) => {
    const limits = {
      expiresAt: flags.expiresAt === undefined ? null : parseExpiresAt(flags.expiresAt, '--expires-at'),
      rateLimit: flags.rateLimit === undefined ? null : parseRateLimit(flags.rateLimit, '--rate-limit'),
      labels: flags.label.length ? labelsOfFlags(flags.label) : null,
    };
    const audit = await cliActor();
    const created = await withStore(flags, (store) => store.keys.create({ name: flags.name ?? null, test: flags.test === true, accountId: flags.account ?? null, ...limits }, audit));
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
    for (const k of list) process.stdout.write((flags.json ? JSON.stringify(keyBody(k)) : keyLine(k)) + '\n');
  });

  addSettingFlags(keys.command('revoke').description('revoke a key by its id').argument('<id>', 'key id (key_...)'), 'keys').action(
    async (id: string, flags: StoreFlags) => {
      const audit = await cliActor();
      const revoked = await withStore(flags, (store) => store.keys.revoke(id, audit));
      process.stdout.write(revoked ? `revoked ${id}\n` : `${id} was already revoked\n`);
    },
  );
}

/** commander's collector of a repeated flag. */
function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** A key in `keys list`: id, mode, hint, account, state, then what is set of limit, expiry, labels and name. */
function keyLine(k: KeyInfo): string {
  const state = k.revokedAt ? `revoked ${k.revokedAt}` : k.expiresAt && Date.parse(k.expiresAt) <= Date.now() ? `expired ${k.expiresAt}` : 'active';
  const extra = [
    k.expiresAt && !k.revokedAt && state === 'active' ? `expires ${k.expiresAt}` : null,
    k.rateLimit !== null ? `${k.rateLimit}/min` : null,
    ...Object.entries(k.labels).map(([name, value]) => `${name}=${value}`),
    k.name,
  ].filter((x): x is string => Boolean(x));
  return `${k.id}  ${k.test ? 'test' : 'live'}  ...${k.hint}  ${k.accountId}  ${state}${extra.length ? `  ${extra.join('  ')}` : ''}`;
}
