/**
 * Tests of the outbound URL guard. Every socket goes to 127.0.0.1 or ::1: the network is closed
 * and anything else is watched. Made-up host names are answered by an injected resolver, and
 * `dns.lookup` itself is guarded below so a regression cannot leak a DNS query either.
 */
import t, { type Test } from 'tap';
import dns from 'node:dns';
import http from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import https from 'node:https';
import tls from 'node:tls';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  assertPublicUrl,
  canonicalIp,
  classifyAddress,
  fetchImageUrl,
  postJson,
  type AddressClassification,
  type NetworkSeams,
  type ResolvedAddress,
} from '../src/net/fetch-url.js';
import { CutoutError, type ErrorCode } from '../src/errors.js';
import { LIMITS } from '../src/limits.js';

// ---------------------------------------------------------------------------------------------
// DNS guard: only `localhost` (answered from /etc/hosts) and IP literals (server.listen looks
// up its host) may reach the real resolver.
// Node's http falls back to dns.lookup when no `lookup` is passed, so this also catches a
// connection that is not pinned to the checked address.
// ---------------------------------------------------------------------------------------------
const realLookup = dns.lookup;
const guardedLookups: string[] = [];
(dns as { lookup: unknown }).lookup = (hostname: string, ...rest: unknown[]) => {
  if (hostname === 'localhost' || isIP(hostname) !== 0) return (realLookup as (...args: unknown[]) => void)(hostname, ...rest);
  guardedLookups.push(hostname);
  const callback = rest[rest.length - 1] as (err: Error) => void;
  process.nextTick(callback, Object.assign(new Error(`test guard: no DNS for ${hostname}`), { code: 'ENOTFOUND' }));
};
t.teardown(() => {
  (dns as { lookup: unknown }).lookup = realLookup;
});

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

interface TestServer {
  origin: string;
  port: number;
  /** Paths requested so far, in order. */
  paths: string[];
  requests: http.IncomingMessage[];
  bodies: string[];
}

/** Starts an HTTP server on a free port of a loopback address; closed when the test ends. */
async function startServer(t: Test, handler: http.RequestListener, host = '127.0.0.1'): Promise<TestServer> {
  const paths: string[] = [];
  const requests: http.IncomingMessage[] = [];
  const bodies: string[] = [];
  const server = http.createServer((req, res) => {
    paths.push(req.url ?? '');
    requests.push(req);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => bodies.push(Buffer.concat(chunks).toString('utf8')));
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as AddressInfo;
  const origin = host.includes(':') ? `http://[${host}]:${port}` : `http://${host}:${port}`;
  return { origin, port, paths, requests, bodies };
}

/** Awaits a promise that must reject with a CutoutError of `code` whose message matches. */
async function expectRefusal(t: Test, work: Promise<unknown>, code: ErrorCode, message: RegExp): Promise<CutoutError | undefined> {
  const outcome = await work.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  if (outcome.ok) {
    t.fail(`expected ${code} matching ${message}, but it resolved`);
    return undefined;
  }
  if (!(outcome.err instanceof CutoutError)) {
    t.fail(`expected a CutoutError, got ${String(outcome.err)}`);
    return undefined;
  }
  t.equal(outcome.err.code, code, `code ${code}`);
  t.match(outcome.err.message, message);
  return outcome.err;
}

/** A resolver for made-up names; records what it was asked. Unknown names fail like DNS does. */
function fakeResolver(table: Record<string, string[]>): { resolveHost: NonNullable<NetworkSeams['resolveHost']>; asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    resolveHost: async (hostname: string): Promise<ResolvedAddress[]> => {
      asked.push(hostname);
      const addresses = table[hostname];
      if (addresses === undefined) throw Object.assign(new Error(`no such host ${hostname}`), { code: 'ENOTFOUND' });
      return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    },
  };
}

/**
 * The real classifier, except that the IPv4 test server counts as public. Offline, no host that
 * resolves publicly can be reached, so this is the only way to let a first hop pass with
 * `allowPrivateNetwork: false` and watch the redirect target go through the real check.
 * Only the exact string '127.0.0.1' is waived: every other spelling, and ::1, stay blocked.
 */
const treatTestServerAsPublic = (ip: string): AddressClassification =>
  ip === '127.0.0.1' ? { verdict: 'public', reason: 'test server' } : classifyAddress(ip);

const ALLOW = { allowPrivateNetwork: true } as const;
const DENY = { allowPrivateNetwork: false } as const;

// ---------------------------------------------------------------------------------------------
// classifyAddress
// ---------------------------------------------------------------------------------------------

t.test('classifyAddress blocks every non-public range, naming it', async (t) => {
  const blocked: Array<[string, RegExp]> = [
    ['127.0.0.1', /^loopback$/],
    ['127.255.255.254', /^loopback$/],
    ['10.1.2.3', /^private$/],
    ['172.16.0.1', /^private$/],
    ['172.31.255.255', /^private$/],
    ['192.168.1.1', /^private$/],
    ['100.64.0.1', /^carrierGradeNat$/],
    ['100.127.255.255', /^carrierGradeNat$/],
    ['169.254.1.1', /^linkLocal$/],
    ['224.0.0.1', /^multicast$/],
    ['239.255.255.250', /^multicast$/],
    ['0.0.0.0', /^unspecified$/],
    ['0.1.2.3', /^unspecified$/],
    ['255.255.255.255', /^broadcast$/],
    ['240.0.0.1', /^reserved$/],
    ['192.0.2.10', /^reserved$/], // TEST-NET-1
    ['198.18.0.1', /^reserved$/], // benchmarking
    ['192.0.0.8', /^reserved$/],
    // cloud metadata
    ['169.254.169.254', /cloud metadata/],
    ['100.100.100.200', /cloud metadata/],
    ['fd00:ec2::254', /cloud metadata/],
    // IPv6 ranges
    ['::1', /^loopback$/],
    ['::', /^unspecified$/],
    ['fe80::1', /^linkLocal$/],
    ['fe80::1%eth0', /^linkLocal$/],
    ['febf:ffff::1', /^linkLocal$/],
    ['fc00::1', /^uniqueLocal$/],
    ['fd12:3456:789a::1', /^uniqueLocal$/],
    ['ff02::1', /^multicast$/],
    ['2001:db8::1', /^reserved$/],
    ['fec0::1', /^deprecatedSiteLocal$/],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /^teredo$/],
    // IPv4-mapped IPv6 in both spellings, with and without brackets
    ['::ffff:127.0.0.1', /ipv4Mapped embedding 127\.0\.0\.1 \(loopback\)/],
    ['::ffff:7f00:1', /ipv4Mapped embedding 127\.0\.0\.1 \(loopback\)/],
    ['[::ffff:127.0.0.1]', /ipv4Mapped embedding 127\.0\.0\.1 \(loopback\)/],
    ['::ffff:10.0.0.1', /ipv4Mapped embedding 10\.0\.0\.1 \(private\)/],
    ['::ffff:169.254.169.254', /ipv4Mapped embedding 169\.254\.169\.254 \(cloud metadata/],
    ['::ffff:0:7f00:1', /rfc6145 embedding 127\.0\.0\.1 \(loopback\)/],
    // IPv4-compatible (deprecated ::/96)
    ['::127.0.0.1', /IPv4-compatible/],
    ['::7f00:1', /IPv4-compatible/],
    ['::8.8.8.8', /IPv4-compatible/],
    // NAT64 embedding a non-public IPv4, and the local-use NAT64 prefix
    ['64:ff9b::10.0.0.1', /rfc6052 embedding 10\.0\.0\.1 \(private\)/],
    ['64:ff9b::7f00:1', /rfc6052 embedding 127\.0\.0\.1 \(loopback\)/],
    ['64:ff9b::a9fe:a9fe', /rfc6052 embedding 169\.254\.169\.254 \(cloud metadata/],
    ['64:ff9b:1::808:808', /local-use NAT64/],
    // 6to4 embedding a non-public IPv4 in bits 16..47
    ['2002:7f00:1::1', /6to4 embedding 127\.0\.0\.1 \(loopback\)/],
    ['2002:c0a8:101::1', /6to4 embedding 192\.168\.1\.1 \(private\)/],
    ['2002:a9fe:a9fe::', /6to4 embedding 169\.254\.169\.254 \(cloud metadata/],
  ];
  for (const [ip, reason] of blocked) {
    const result = classifyAddress(ip);
    t.equal(result.verdict, 'blocked', `${ip} is blocked`);
    t.match(result.reason, reason, `${ip}: ${result.reason}`);
  }
});

t.test('classifyAddress reads odd IPv4 spellings as the URL parser does', async (t) => {
  const spellings: Array<[string, RegExp]> = [
    ['127.1', /^loopback$/],
    ['2130706433', /^loopback$/],
    ['0x7f000001', /^loopback$/],
    ['0x7F000001', /^loopback$/],
    ['0177.0.0.1', /^loopback$/],
    ['0x7f.0.0.1', /^loopback$/],
    ['0x7f.1', /^loopback$/],
    ['127.0.0.1.', /^loopback$/],
    ['0', /^unspecified$/],
    ['012.0.0.1', /^private$/], // octal 012 = 10
    ['3232235777', /^private$/], // 192.168.1.1
    ['0xa9fea9fe', /cloud metadata/], // 169.254.169.254
    ['169.254.43518', /cloud metadata/], // 169.254.(169*256+254)
  ];
  for (const [ip, reason] of spellings) {
    const result = classifyAddress(ip);
    t.equal(result.verdict, 'blocked', `${ip} is blocked`);
    t.match(result.reason, reason, `${ip}: ${result.reason}`);
  }
});

t.test('classifyAddress lets public unicast through, in any spelling', async (t) => {
  const publicAddresses = [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '11.0.0.1', // just past 10/8
    '172.32.0.1', // just past 172.16/12
    '100.128.0.1', // just past 100.64/10
    '169.255.0.1', // just past 169.254/16
    '134744072', // 8.8.8.8 as one number: odd spellings are read, not refused outright
    '0x08080808',
    '2606:4700::1111',
    '2a00:1450:4001:82a::200e',
    '::ffff:8.8.8.8', // IPv4-mapped public
    '64:ff9b::808:808', // NAT64 of a public IPv4 (what DNS64 hands out)
    '2002:808:808::1', // 6to4 of a public IPv4
  ];
  for (const ip of publicAddresses) {
    t.same(classifyAddress(ip).verdict, 'public', `${ip} is public (${classifyAddress(ip).reason})`);
  }
});

t.test('classifyAddress fails closed on anything that is not an IP address', async (t) => {
  for (const text of ['', 'localhost', 'example.com', '08.0.0.1', '1.2.3.4.5', '256.0.0.1', '::ffff:127.0.0.1:80', '127.0.0.1/8', 'a@127.0.0.1', '[::1']) {
    t.same(classifyAddress(text), { verdict: 'blocked', reason: 'not an IP address' }, JSON.stringify(text));
  }
});

t.test('canonicalIp normalises spellings and keeps IPv4-compatible apart from IPv4-mapped', async (t) => {
  for (const spelling of ['127.1', '2130706433', '0x7f000001', '0177.0.0.1', '127.0.0.1.']) {
    t.same(canonicalIp(spelling), { address: '127.0.0.1', family: 4 }, spelling);
  }
  t.same(canonicalIp('[::ffff:127.0.0.1]'), { address: '::ffff:7f00:1', family: 6 });
  // ipaddr.js 2.5 parses `::127.0.0.1` as `::ffff:7f00:1`; the URL parser gets it right.
  t.same(canonicalIp('::127.0.0.1'), { address: '::7f00:1', family: 6 });
  t.same(canonicalIp('FE80::1%eth0'), { address: 'fe80::1', family: 6 });
  t.equal(canonicalIp('example.com'), null);
});

// ---------------------------------------------------------------------------------------------
// assertPublicUrl
// ---------------------------------------------------------------------------------------------

t.test('assertPublicUrl refuses IP-literal hosts in every spelling, without asking DNS', async (t) => {
  const resolver = fakeResolver({});
  const urls = [
    'http://127.0.0.1/',
    'http://127.1/',
    'http://2130706433/',
    'http://0x7f000001/',
    'http://0177.0.0.1/',
    'http://%31%32%37.0.0.1/',
    'http://[::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]:8080/',
    'https://[::127.0.0.1]/',
    'http://0/',
    'http://169.254.169.254/latest/meta-data/',
    'http://[fd00:ec2::254]/',
    'http://10.0.0.1:9200/_cat',
  ];
  for (const url of urls) {
    await expectRefusal(t, assertPublicUrl(url, DENY, { resolveHost: resolver.resolveHost }), 'invalid_request', /is not a public address/);
  }
  t.same(resolver.asked, [], 'literals never reach the resolver');
});

t.test('assertPublicUrl refuses a host when ANY of its addresses is blocked', async (t) => {
  const resolver = fakeResolver({
    'mixed4.test': ['93.184.216.34', '10.0.0.7'],
    'mixed6.test': ['2606:4700::1111', '::1'],
    'rebind.test': ['127.0.0.1'],
    'mapped.test': ['::ffff:192.168.0.1'],
    'cdn.test': ['93.184.216.34', '2606:4700::1111'],
  });
  const seams = { resolveHost: resolver.resolveHost };
  await expectRefusal(t, assertPublicUrl('http://mixed4.test/a.png', DENY, seams), 'invalid_request', /mixed4\.test is not a public address: private\. Only public http\(s\) URLs are allowed; for development and tests, start the server with --allow-private-network to reach loopback and private addresses\.$/);
  await expectRefusal(t, assertPublicUrl('https://mixed6.test/a.png', DENY, seams), 'invalid_request', /: loopback\./);
  await expectRefusal(t, assertPublicUrl('http://rebind.test/', DENY, seams), 'invalid_request', /: loopback\./);
  await expectRefusal(t, assertPublicUrl('http://mapped.test/', DENY, seams), 'invalid_request', /ipv4Mapped embedding 192\.168\.0\.1/);
  const refusal = await expectRefusal(t, assertPublicUrl('http://mixed4.test/', DENY, seams), 'invalid_request', /./);
  t.notMatch(refusal?.message ?? '', /10\.0\.0\.7/, 'the message does not disclose the internal address');

  // All public: accepted, and the first address is the one to connect to. No connection is made.
  const checked = await assertPublicUrl('https://cdn.test:8443/img/a.png?x=1', DENY, seams);
  t.equal(checked.address, '93.184.216.34');
  t.equal(checked.family, 4);
  t.equal(checked.url.href, 'https://cdn.test:8443/img/a.png?x=1');
});

t.test('assertPublicUrl with the system resolver refuses localhost', async (t) => {
  const refusal = await expectRefusal(t, assertPublicUrl('http://localhost:8080/', DENY), 'invalid_request', /localhost is not a public address: loopback\./);
  t.match(refusal?.message, /--allow-private-network/, 'the image_url refusal names the flag that lifts it');
});

t.test('assertPublicUrl reports a host that does not resolve', async (t) => {
  const resolver = fakeResolver({ 'empty.test': [] });
  await expectRefusal(t, assertPublicUrl('http://nowhere.test/', DENY, resolver), 'invalid_request', /nowhere\.test could not be resolved \(ENOTFOUND\)/);
  await expectRefusal(t, assertPublicUrl('http://empty.test/', DENY, resolver), 'invalid_request', /has no address/);
});

t.test('allowPrivateNetwork lifts the address check only', async (t) => {
  const v4 = await assertPublicUrl('http://127.0.0.1:8080/x', ALLOW);
  t.same({ address: v4.address, family: v4.family }, { address: '127.0.0.1', family: 4 });
  const odd = await assertPublicUrl('http://2130706433/', ALLOW);
  t.equal(odd.address, '127.0.0.1', 'odd spellings connect where the URL parser says');
  const v6 = await assertPublicUrl('http://[::1]:8080/x', ALLOW);
  t.same({ address: v6.address, family: v6.family }, { address: '::1', family: 6 });

  const resolver = fakeResolver({});
  for (const opts of [ALLOW, DENY]) {
    for (const url of ['ftp://example.com/a.png', 'file:///etc/passwd', 'gopher://example.com/', 'data:image/png;base64,iVBORw0KGgo=', 'javascript:alert(1)', 'ws://example.com/']) {
      await expectRefusal(t, assertPublicUrl(url, opts, resolver), 'invalid_request', /must use http or https, not [a-z]+\./);
    }
    for (const url of ['http://user:secret@example.com/a.png', 'https://user@example.com/', 'http://:secret@example.com/']) {
      await expectRefusal(t, assertPublicUrl(url, opts, resolver), 'invalid_request', /must not contain credentials/);
    }
    await expectRefusal(t, assertPublicUrl('not a url', opts, resolver), 'invalid_request', /not a valid absolute URL/);
  }
  t.same(resolver.asked, [], 'refused before any DNS');
  await expectRefusal(t, assertPublicUrl('ftp://x/', { ...ALLOW, label: 'callback URL' }), 'invalid_request', /^callback URL must use/);
});

// ---------------------------------------------------------------------------------------------
// fetchImageUrl
// ---------------------------------------------------------------------------------------------

t.test('fetchImageUrl returns the exact bytes; refuses the same URL without allowPrivateNetwork', async (t) => {
  const image = randomBytes(300_000);
  const server = await startServer(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': image.length });
    res.end(image);
  });
  const fetched = await fetchImageUrl(`${server.origin}/cat.png`, ALLOW);
  t.equal(fetched.length, image.length);
  t.ok(fetched.equals(image), 'byte for byte');
  t.same(server.paths, ['/cat.png']);

  await expectRefusal(t, fetchImageUrl(`${server.origin}/cat.png`, DENY), 'invalid_request', /127\.0\.0\.1 is not a public address: loopback\./);
  t.equal(server.paths.length, 1, 'the refused fetch never reached the server');
});

t.test('fetchImageUrl connects to the checked address, with the original Host header', async (t) => {
  const server = await startServer(t, (_req, res) => res.end('pinned'));
  // `images.test` exists only in this resolver: the request can only arrive if the socket was
  // pointed at the checked address; any second lookup would hit the DNS guard and fail.
  const resolver = fakeResolver({ 'images.test': ['127.0.0.1'] });
  const fetched = await fetchImageUrl(`http://images.test:${server.port}/a.png`, ALLOW, resolver);
  t.equal(fetched.toString(), 'pinned');
  t.same(resolver.asked, ['images.test'], 'resolved exactly once');
  t.equal(server.requests[0]?.headers.host, `images.test:${server.port}`);
  t.same(guardedLookups, [], 'no lookup through dns.lookup');

  // The same with the address check on (test server waived), to pin the checked path as well.
  const checked = await fetchImageUrl(`http://images.test:${server.port}/b.png`, DENY, { ...resolver, classify: treatTestServerAsPublic });
  t.equal(checked.toString(), 'pinned');
});

t.test('fetchImageUrl follows at most maxRedirects redirects', async (t) => {
  // /hop/N redirects (relative Location) to /hop/N-1; /hop/0 is the image.
  const server = await startServer(t, (req, res) => {
    const n = Number(/^\/hop\/(\d+)$/.exec(req.url ?? '')?.[1] ?? NaN);
    if (n > 0) {
      res.writeHead(n % 2 === 0 ? 302 : 301, { location: `/hop/${n - 1}` });
      res.end('moved');
    } else if (n === 0) {
      res.end('landed');
    } else {
      res.writeHead(404).end();
    }
  });
  const max = LIMITS.maxRedirects;
  const fetched = await fetchImageUrl(`${server.origin}/hop/${max}`, ALLOW);
  t.equal(fetched.toString(), 'landed', `${max} redirects are followed`);

  server.paths.length = 0;
  await expectRefusal(t, fetchImageUrl(`${server.origin}/hop/${max + 1}`, ALLOW), 'invalid_request', new RegExp(`redirected more than ${max} times`));
  t.notOk(server.paths.includes('/hop/0'), 'the redirect past the limit is not followed');
  t.equal(server.paths.length, max + 1);

  await expectRefusal(t, fetchImageUrl(`${server.origin}/hop/1`, { ...ALLOW, maxRedirects: 0 }), 'invalid_request', /redirected more than 0 times/);
  const viaOption = await fetchImageUrl(`${server.origin}/hop/5`, { ...ALLOW, maxRedirects: 5 });
  t.equal(viaOption.toString(), 'landed');
});

t.test('fetchImageUrl re-checks every redirect target', async (t) => {
  // The target is a real, listening loopback server: if the redirect were followed, it would
  // get a request. It must get none.
  const inside = await startServer(t, (_req, res) => res.end('internal secret'), '::1');
  const entry = await startServer(t, (req, res) => {
    const targets: Record<string, string> = {
      '/to-v6-loopback': `${inside.origin}/secret`,
      '/to-name-resolving-to-loopback': `http://internal.test:${inside.port}/secret`,
      '/to-mapped-loopback': `http://[::ffff:127.0.0.1]:${entry.port}/should-not-be-reached`,
      '/to-odd-spelling': `http://0x7f.1:${entry.port}/should-not-be-reached`,
      '/to-file': 'file:///etc/passwd',
      '/to-credentials': `http://user:pw@127.0.0.1:${entry.port}/should-not-be-reached`,
    };
    const location = targets[req.url ?? ''];
    if (location === undefined) {
      res.end('reached');
      return;
    }
    res.writeHead(302, { location });
    res.end();
  });
  const seams: NetworkSeams = {
    classify: treatTestServerAsPublic,
    resolveHost: fakeResolver({ 'internal.test': ['::1'] }).resolveHost,
  };

  await expectRefusal(t, fetchImageUrl(`${entry.origin}/to-v6-loopback`, DENY, seams), 'invalid_request', /\[::1\] is not a public address: loopback\./);
  await expectRefusal(t, fetchImageUrl(`${entry.origin}/to-name-resolving-to-loopback`, DENY, seams), 'invalid_request', /internal\.test is not a public address: loopback\./);
  await expectRefusal(t, fetchImageUrl(`${entry.origin}/to-mapped-loopback`, DENY, seams), 'invalid_request', /ipv4Mapped embedding 127\.0\.0\.1/);
  t.same(inside.paths, [], 'the blocked ::1 server was never contacted');
  t.same(entry.paths, ['/to-v6-loopback', '/to-name-resolving-to-loopback', '/to-mapped-loopback'], 'only the allowed first hops were requested');

  // A control, so the refusals above are known to come from the check: with the check lifted
  // the same redirects are followed.
  t.equal((await fetchImageUrl(`${entry.origin}/to-v6-loopback`, ALLOW, seams)).toString(), 'internal secret');
  t.equal((await fetchImageUrl(`${entry.origin}/to-odd-spelling`, ALLOW, seams)).toString(), 'reached');

  // The scheme and credential rules apply to redirect targets too, check lifted or not.
  for (const opts of [ALLOW, DENY]) {
    await expectRefusal(t, fetchImageUrl(`${entry.origin}/to-file`, opts, seams), 'invalid_request', /must use http or https, not file/);
    await expectRefusal(t, fetchImageUrl(`${entry.origin}/to-credentials`, opts, seams), 'invalid_request', /must not contain credentials/);
  }
  t.equal(entry.paths.filter((p) => p === '/should-not-be-reached').length, 1, 'reached only by the allowed odd-spelling control');
});

t.test('fetchImageUrl caps the body size', async (t) => {
  const server = await startServer(t, (req, res) => {
    if (req.url === '/declared-too-large') {
      // Announce 5000 bytes but send none: only a refusal on the header can answer in time.
      res.writeHead(200, { 'content-length': 5000 });
      res.flushHeaders();
    } else if (req.url === '/streams-forever') {
      // Chunked, no length, never ends: only counting while streaming can stop it.
      res.writeHead(200, { 'content-type': 'image/png' });
      const timer = setInterval(() => res.write(Buffer.alloc(512, 1)), 5);
      res.on('close', () => clearInterval(timer));
    } else if (req.url === '/exactly-at-cap') {
      res.writeHead(200);
      res.write(Buffer.alloc(600, 2));
      res.end(Buffer.alloc(400, 3));
    } else {
      res.writeHead(404).end();
    }
  });
  const opts = { ...ALLOW, maxBytes: 1000, timeoutMs: 5000 };
  const started = Date.now();
  await expectRefusal(t, fetchImageUrl(`${server.origin}/declared-too-large`, opts), 'image_too_large', /over the 1000 bytes limit/);
  await expectRefusal(t, fetchImageUrl(`${server.origin}/streams-forever`, opts), 'image_too_large', /over the 1000 bytes limit/);
  t.ok(Date.now() - started < 4000, 'both refused well before the timeout');

  const atCap = await fetchImageUrl(`${server.origin}/exactly-at-cap`, opts);
  t.equal(atCap.length, 1000, 'a body of exactly maxBytes is accepted');
  t.same([atCap[0], atCap[999]], [2, 3]);
});

t.test('fetchImageUrl uses LIMITS.maxInputBytes by default', async (t) => {
  const server = await startServer(t, (_req, res) => {
    res.writeHead(200, { 'content-length': LIMITS.maxInputBytes + 1 });
    res.flushHeaders();
  });
  await expectRefusal(t, fetchImageUrl(`${server.origin}/huge`, ALLOW), 'image_too_large', /over the 25 MB limit/);
});

t.test('fetchImageUrl gives up after timeoutMs', async (t) => {
  const server = await startServer(t, (req, res) => {
    if (req.url === '/stalls-mid-body') {
      res.writeHead(200, { 'content-length': 1000 });
      res.write(Buffer.alloc(10));
    }
    // '/never-answers': no response at all
  });
  for (const path of ['/never-answers', '/stalls-mid-body']) {
    const started = Date.now();
    await expectRefusal(t, fetchImageUrl(`${server.origin}${path}`, { ...ALLOW, timeoutMs: 300 }), 'invalid_request', /^image_url timed out after 300 ms\.$/);
    const elapsed = Date.now() - started;
    t.ok(elapsed >= 250 && elapsed < 3000, `${path}: gave up after ${elapsed} ms`);
  }
});

t.test('fetchImageUrl reports upstream status and network errors in one line', async (t) => {
  const server = await startServer(t, (req, res) => {
    res.writeHead(req.url === '/gone' ? 404 : 503).end();
  });
  await expectRefusal(t, fetchImageUrl(`${server.origin}/gone`, ALLOW), 'invalid_request', /^image_url answered HTTP 404 Not Found; expected 2xx\.$/);
  await expectRefusal(t, fetchImageUrl(`${server.origin}/busy`, ALLOW), 'invalid_request', /HTTP 503/);

  // A body cut short of its Content-Length is an error, not a truncated image.
  const truncating = await startServer(t, (_req, res) => {
    res.writeHead(200, { 'content-length': 1000 });
    res.write(Buffer.alloc(100), () => res.socket?.destroy());
  });
  await expectRefusal(t, fetchImageUrl(`${truncating.origin}/short`, { ...ALLOW, timeoutMs: 5000 }), 'invalid_request', /^Could not reach http:\/\/127\.0\.0\.1:\d+: connection reset by the server\.$/);

  // A port that was just free: nothing listens there.
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const refusal = await expectRefusal(t, fetchImageUrl(`http://127.0.0.1:${port}/secret/path?token=abc`, ALLOW), 'invalid_request', new RegExp(`^Could not reach http://127\\.0\\.0\\.1:${port}: connection refused\\.$`));
  t.notMatch(refusal?.message ?? '', /token/, 'path and query are not echoed');
});

/** A throwaway self-signed certificate for `images.test`, or null when openssl is missing. */
function selfSignedCertificate(): { key: Buffer; cert: Buffer } | null {
  const dir = mkdtempSync(join(tmpdir(), 'cutout-fetch-url-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=images.test',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  } catch {
    return null;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const tlsCredentials = selfSignedCertificate();

t.test('https: SNI carries the host name while the socket goes to the checked address', { skip: tlsCredentials === null && 'openssl is not available' }, async (t) => {
  const credentials = tlsCredentials!;
  const serverNames: string[] = [];
  const context = tls.createSecureContext(credentials);
  const server = https.createServer({
    ...credentials,
    SNICallback: (name, done) => {
      serverNames.push(name);
      done(null, context);
    },
  }, (_req, res) => res.end('should not be served'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as AddressInfo;
  const resolver = fakeResolver({ 'images.test': ['127.0.0.1'] });

  // The certificate is self-signed, so verification must fail: allowPrivateNetwork never turns
  // TLS verification off. Reaching that failure proves the handshake went to 127.0.0.1.
  await expectRefusal(t, fetchImageUrl(`https://images.test:${port}/a.png`, ALLOW, resolver), 'invalid_request',
    new RegExp(`^Could not reach https://images\\.test:${port}: TLS failure \\([A-Z_]+\\)\\.$`));
  t.same(serverNames, ['images.test'], 'SNI is the host name, not the address');
  t.same(resolver.asked, ['images.test']);
});

t.test('fetchImageUrl refuses non-http schemes and credentials even with allowPrivateNetwork', async (t) => {
  await expectRefusal(t, fetchImageUrl('ftp://127.0.0.1/a.png', ALLOW), 'invalid_request', /must use http or https, not ftp/);
  await expectRefusal(t, fetchImageUrl('file:///etc/passwd', ALLOW), 'invalid_request', /must use http or https, not file/);
  await expectRefusal(t, fetchImageUrl('http://user:pw@127.0.0.1/a.png', ALLOW), 'invalid_request', /must not contain credentials/);
});

// ---------------------------------------------------------------------------------------------
// postJson
// ---------------------------------------------------------------------------------------------

t.test('postJson delivers the body and headers and returns the status', async (t) => {
  const server = await startServer(t, (req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/moved') res.writeHead(302, { location: '/elsewhere' }).end();
      else res.writeHead(req.url === '/fails' ? 500 : 204).end();
    });
  });
  const body = JSON.stringify({ job_id: 'abc', status: 'done', note: 'héllo' });
  const result = await postJson(`${server.origin}/hook?x=1`, body, { 'x-cutout-signature': 'sha256=deadbeef' }, { ...ALLOW, timeoutMs: 2000 });
  t.same(result, { status: 204 });
  const req = server.requests[0]!;
  t.equal(req.method, 'POST');
  t.equal(req.url, '/hook?x=1');
  t.equal(req.headers['content-type'], 'application/json');
  t.equal(req.headers['x-cutout-signature'], 'sha256=deadbeef');
  t.equal(req.headers['content-length'], String(Buffer.byteLength(body)));
  t.equal(server.bodies[0], body);

  t.same(await postJson(`${server.origin}/fails`, '{}', {}, { ...ALLOW, timeoutMs: 2000 }), { status: 500 }, 'non-2xx resolves');
  t.same(await postJson(`${server.origin}/moved`, '{}', {}, { ...ALLOW, timeoutMs: 2000 }), { status: 302 }, 'redirect returned, not followed');
  t.notOk(server.paths.includes('/elsewhere'));
});

t.test('postJson applies the same address check and time cap', async (t) => {
  const server = await startServer(t, (req) => {
    req.resume(); // and never answer
  });
  const hook = await expectRefusal(t, postJson(`${server.origin}/hook`, '{}', {}, { ...DENY, timeoutMs: 2000 }), 'invalid_request', /^callback URL host 127\.0\.0\.1 is not a public address: loopback\./);
  t.match(hook?.message, /start the server with --allow-private-network/, 'the callback refusal names the flag that lifts it');
  t.same(server.paths, [], 'refused before connecting');
  await expectRefusal(t, postJson('ftp://127.0.0.1/hook', '{}', {}, { ...ALLOW, timeoutMs: 2000 }), 'invalid_request', /^callback URL must use http or https/);
  await expectRefusal(t, postJson(`${server.origin}/hook`, '{}', {}, { ...ALLOW, timeoutMs: 300 }), 'invalid_request', /^callback URL timed out after 300 ms\.$/);
  t.same(server.paths, ['/hook']);
});

t.test('no test reached the system resolver for anything but localhost', async (t) => {
  t.same(guardedLookups, []);
});
