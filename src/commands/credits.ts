/** `cutout credits add ACCOUNT_OR_KEY_ID AMOUNT`: purchased credits (they never expire), in the audit trail as `cli:<os user>`. */
import type { Command } from 'commander';
import { cliActor } from '../audit-trail.js';
import { UsageError } from './usage-error.js';
import { withStore, type StoreFlags } from './keys.js';
import { addSettingFlags } from './setting-flags.js';

export function registerCredits(program: Command): void {
  const credits = program.command('credits').description('manage credits');
  addSettingFlags(
    credits
      .command('add')
      .description('add purchased credits to an account (given its id or one of its keys\' ids)')
      .argument('<account_or_key_id>', 'acct_... or key_...')
      .argument('<amount>', 'a whole number of credits')
      .option('--reason <text>', 'why, kept with the ledger row and in the audit trail (an invoice number, ...)')
      .option('--json', 'print {"account", "balance"}'),
    'credits',
  ).action(async (target: string, amountText: string, flags: StoreFlags & { json?: boolean; reason?: string }) => {
    if (!/^\d+$/.test(amountText) || Number(amountText) < 1) throw new UsageError(`Expected a whole number of credits above 0 for AMOUNT but received ${JSON.stringify(amountText)}`);
    const audit = await cliActor();
    const result = await withStore(flags, (store) => store.ledger.addCredits(target, Number(amountText), { note: flags.reason ?? null, audit }), 'credits');
    if (flags.json) process.stdout.write(JSON.stringify({ account: result.accountId, balance: result.balance }) + '\n');
    else process.stdout.write(`${result.accountId}: balance ${result.balance} credits\n`);
  });
}
