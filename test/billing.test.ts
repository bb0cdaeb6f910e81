/** The billing rules as pure functions (src/billing.ts): who pays, the price, the pre-check. */
import t from 'tap';
import { assertFunded, canAfford, chargeFor, LOCAL_PAYER, payerOfCaller, payerOfKey, priceOf, upfrontPrice } from '../src/billing.js';
import { CutoutError } from '../src/errors.js';

const balances: Record<string, number> = { rich: 5, broke: 0 };
const balanceOf = async (id: string) => balances[id];
const live = payerOfCaller({ accountId: 'broke', keyId: 'k', test: false, channel: 'key' });

t.test('who pays and how much', async (t) => {
  t.same(live, { accountId: 'broke', keyId: 'k', billable: true });
  t.equal(payerOfCaller({ accountId: 'a', keyId: 'k', test: true, channel: 'key' }).billable, false, 'a test key never pays');
  t.equal(payerOfCaller({ accountId: 'a', keyId: null, test: false, channel: 'marketplace' }).billable, false, 'the marketplace bills its users');
  t.same(payerOfKey(null), LOCAL_PAYER);
  t.same([priceOf('full'), priceOf('preview')], [1, 0]);
  t.same([chargeFor(live, 'full'), chargeFor(LOCAL_PAYER, 'full')], [1, 0]);
  t.same([upfrontPrice('full'), upfrontPrice('preview'), upfrontPrice('auto'), upfrontPrice('auto', 1_000_000), upfrontPrice('auto', 5_000_000)], [1, 0, 0, 1, 0]);
});

t.test('canAfford and the pre-check agree', async (t) => {
  t.equal(await canAfford(live, 1, balanceOf), false);
  t.equal(await canAfford(live, 0, balanceOf), true, 'a free result needs no credit');
  t.equal(await canAfford({ accountId: 'rich', billable: true }, 1, balanceOf), true);
  t.equal(await canAfford({ accountId: 'broke', billable: false }, 1, balanceOf), true, 'a payer who does not pay with credits');
  await t.rejects(assertFunded(live, 1, balanceOf, (b) => `balance ${b}`), new CutoutError('insufficient_credits', 'balance 0'));
  await t.resolves(assertFunded({ accountId: 'rich', billable: true }, 5, balanceOf));
});
