/** Pure parts of the store: PostgreSQL's placeholder numbering and the rate limit's window arithmetic. */
import t from 'tap';
import { numberPlaceholders } from '../src/store/postgres.js';
import { decide } from '../src/store/rate-limit.js';
import { parseIdentity } from '../src/store/engine-sqlite.js';

t.test('placeholders are numbered outside quotes only', async (t) => {
  t.equal(numberPlaceholders('SELECT a FROM t WHERE b = ? AND c IN (?, ?)'), 'SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)');
  t.equal(numberPlaceholders("UPDATE t SET s = 'why?' WHERE id = ?"), "UPDATE t SET s = 'why?' WHERE id = $1");
  t.equal(numberPlaceholders('SELECT "odd?name" FROM t WHERE x = ?'), 'SELECT "odd?name" FROM t WHERE x = $1');
  t.equal(numberPlaceholders("INSERT INTO r VALUES (?, '[]', ?)"), "INSERT INTO r VALUES ($1, '[]', $2)");
});

t.test('rate window: counts the last window only, refusals are not counted, reset is when the oldest leaves', async (t) => {
  const now = 1_000_000;
  const first = decide([], 2, 60_000, now);
  t.same(first, { log: [now], decision: { allowed: true, limit: 2, remaining: 1, reset: Math.ceil((now + 60_000) / 1000), retryAfter: 0 } });
  const full = decide([now - 10_000, now - 5_000], 2, 60_000, now);
  t.same(full.log, [now - 10_000, now - 5_000], 'a refused request is not logged');
  t.same([full.decision.allowed, full.decision.remaining, full.decision.retryAfter], [false, 0, 50]);
  const slid = decide([now - 60_000, now - 5_000], 2, 60_000, now);
  t.same([slid.decision.allowed, slid.log], [true, [now - 5_000, now]], 'a request exactly a window old has left it');
});

t.test('a server identity names its host and pid', async (t) => {
  t.same(parseIdentity('web-1:4242:1700000000000:abcdef'), { host: 'web-1', pid: 4242 });
  t.same(parseIdentity('fe80::1:77:1700000000000:abcdef'), { host: 'fe80::1', pid: 77 });
  t.equal(parseIdentity('garbage'), null);
});
