/** Pure parts of the store: PostgreSQL's placeholder numbering and the rate limit's window arithmetic. */
import t from 'tap';
import { numberPlaceholders } from '../src/store/postgres.js';
import { decisionOf } from '../src/store/rate-limit.js';
import { parseIdentity } from '../src/store/engine-sqlite.js';

t.test('placeholders are numbered outside quotes only', async (t) => {
  t.equal(numberPlaceholders('SELECT a FROM t WHERE b = ? AND c IN (?, ?)'), 'SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)');
  t.equal(numberPlaceholders("UPDATE t SET s = 'why?' WHERE id = ?"), "UPDATE t SET s = 'why?' WHERE id = $1");
  t.equal(numberPlaceholders('SELECT "odd?name" FROM t WHERE x = ?'), 'SELECT "odd?name" FROM t WHERE x = $1');
  t.equal(numberPlaceholders("INSERT INTO r VALUES (?, '[]', ?)"), "INSERT INTO r VALUES ($1, '[]', $2)");
});

t.test('rate window: counts the last window only, reset is when the oldest leaves, Retry-After when one more fits', async (t) => {
  const now = 1_000_000;
  t.same(decisionOf([now], true, 2, 60_000, now), { allowed: true, limit: 2, remaining: 1, reset: Math.ceil((now + 60_000) / 1000), retryAfter: 0 });
  const full = decisionOf([now - 10_000, now - 5_000], false, 2, 60_000, now);
  t.same([full.allowed, full.remaining, full.retryAfter, full.reset], [false, 0, 50, Math.ceil((now + 50_000) / 1000)]);
  const slid = decisionOf([now - 60_000, now - 5_000, now], true, 3, 60_000, now);
  t.same([slid.remaining, slid.reset], [1, Math.ceil((now + 55_000) / 1000)], 'a stamp exactly a window old has left it');
  // A log longer than the limit (the limit was lowered since): one more fits when the limit-th
  // newest leaves, not the oldest.
  const lowered = decisionOf([now - 40_000, now - 30_000, now - 20_000], false, 2, 60_000, now);
  t.same([lowered.remaining, lowered.retryAfter], [0, 30]);
});

t.test('a server identity names its host and pid', async (t) => {
  t.same(parseIdentity('web-1:4242:1700000000000:abcdef'), { host: 'web-1', pid: 4242 });
  t.same(parseIdentity('fe80::1:77:1700000000000:abcdef'), { host: 'fe80::1', pid: 77 });
  t.equal(parseIdentity('garbage'), null);
});
