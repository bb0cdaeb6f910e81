/**
 * Who pays, how much, and whether they can: the one place billing is decided. Every door (the
 * sync route, the job routes and runner, the CLI's `--key`) asks here; the ledger only writes the
 * amount it is given (store/ledger.ts recordRun).
 *
 * - Who pays: a live API key pays with its account's credits. A test key never pays (its results
 *   are previews, options.ts forTestKey). A marketplace user is billed by the marketplace, never
 *   by the ledger. A local CLI run without `--key` is recorded, never charged.
 * - The price of a resolved size: `full` costs 1 credit, `preview` nothing.
 * - The pre-check, one rule: refuse before any work when the price is already known to exceed
 *   the balance. A request for `full` costs 1 for sure; `auto` costs 1 when the image is at most
 *   LIMITS.autoFullMaxPixels, which is known only once its header is read (`pixels`); a door that
 *   has not read it (a job at submission) checks what is certain. The final word is the charge's
 *   transaction, which refuses at a balance too low whatever was checked before.
 */
import { ADD_CREDITS, CutoutError } from './errors.js';
import { LIMITS } from './limits.js';
import type { Size } from './options.js';

/** Who a removal is billed to, as the store records it. */
export interface Payer {
  /** null: a local CLI run without --key (recorded, never charged). */
  accountId: string | null;
  keyId: string | null;
  /** Pays with the account's credits (the ledger); false for test keys, the marketplace and local runs. */
  billable: boolean;
}

/** What identifies an HTTP caller, as far as billing cares (server/guards.ts Caller has these). */
export interface CallerBilling {
  accountId: string;
  keyId: string | null;
  test: boolean;
  channel: 'key' | 'marketplace';
}

/** Marketplace callers are billed by the marketplace and test keys never: neither touches the ledger. */
export function paysWithCredits(caller: Pick<CallerBilling, 'channel' | 'test'>): boolean {
  return caller.channel === 'key' && !caller.test;
}

/** The payer of an HTTP caller (an API key or a marketplace user). */
export function payerOfCaller(caller: CallerBilling): Payer {
  return { accountId: caller.accountId, keyId: caller.keyId, billable: paysWithCredits(caller) };
}

/** The payer of a CLI run: its `--key` (authenticated), or nobody. Same rules as the server's keys. */
export function payerOfKey(key: { accountId: string; keyId: string; test: boolean } | null): Payer {
  if (!key) return LOCAL_PAYER;
  return { accountId: key.accountId, keyId: key.keyId, billable: !key.test };
}

/** A local run: recorded under no account, never charged. */
export const LOCAL_PAYER: Readonly<Payer> = Object.freeze({ accountId: null, keyId: null, billable: false });

/**
 * Credits a result of this resolved size costs. An animation is one result, priced as a still:
 * api-spec says a full-resolution result costs 1 credit and `/remove` charges 0 or 1 (its frames
 * are bounded by the pixel budget instead, docs/http-api.md "Animations").
 */
export function priceOf(resolved: 'preview' | 'full'): number {
  return resolved === 'full' ? 1 : 0;
}

/** What the payer is charged for a result of this resolved size. */
export function chargeFor(payer: Pick<Payer, 'billable'>, resolved: 'preview' | 'full'): number {
  return payer.billable ? priceOf(resolved) : 0;
}

/**
 * The price of a request known before its work: `full` for sure; `auto` once the image's pixels
 * are known (`pixels`, from its header) and at most the auto threshold; else nothing yet.
 */
export function upfrontPrice(size: Size, pixels: number | null = null): number {
  if (size === 'full') return priceOf('full');
  if (size === 'auto' && pixels !== null && pixels <= LIMITS.autoFullMaxPixels) return priceOf('full');
  return 0;
}

/** Whether knowing the image's pixels could change the upfront price (`auto` for a paying caller). */
export function needsPixelsToPrice(payer: Pick<Payer, 'billable'>, size: Size): boolean {
  return payer.billable && size === 'auto';
}

/** Whether the payer's balance covers `amount` (always, for a payer who does not pay with credits). */
export async function canAfford(
  payer: Pick<Payer, 'accountId' | 'billable'>,
  amount: number,
  balanceOf: (accountId: string) => Promise<number>,
): Promise<boolean> {
  if (!payer.billable || amount <= 0 || payer.accountId === null) return true;
  return (await balanceOf(payer.accountId)) >= amount;
}

/**
 * The pre-check: throws insufficient_credits when a paying payer's balance is below `amount`
 * (the upfront price of one request, or the sum over a batch). `message` words the refusal for
 * the door (a batch names its count).
 */
export async function assertFunded(
  payer: Pick<Payer, 'accountId' | 'billable'>,
  amount: number,
  balanceOf: (accountId: string) => Promise<number>,
  message?: (balance: number) => string,
): Promise<void> {
  if (await canAfford(payer, amount, balanceOf)) return;
  const balance = await balanceOf(payer.accountId!);
  throw new CutoutError('insufficient_credits', message ? `${message(balance)} ${ADD_CREDITS}` : undefined);
}
