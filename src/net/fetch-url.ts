/**
 * Outbound HTTP for user-supplied URLs: `image_url` downloads and job callbacks.
 *
 * A user-supplied URL is an SSRF vector: without care it reaches loopback services, the private
 * network and cloud metadata endpoints. The rules (design-notes, "Known traps"):
 * - http and https only, no credentials in the URL;
 * - resolve the host once and refuse if ANY resolved address is not public;
 * - connect to exactly the address that was checked (no second DNS lookup, so DNS rebinding
 *   between check and connect cannot redirect us);
 * - re-check every redirect target, follow few of them;
 * - cap bytes and total time.
 * `allowPrivateNetwork` (the `--allow-private-network` flag) lifts only the address check.
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { CutoutError } from '../errors.js';
import { formatMB, LIMITS, MB } from '../limits.js';

// ---------------------------------------------------------------------------------------------
// Address classification
// ---------------------------------------------------------------------------------------------

export interface AddressClassification {
  verdict: 'public' | 'blocked';
  /** Why: an ipaddr.js range name (`loopback`, `private`, ...), `cloud metadata`, or a note. */
  reason: string;
}

/**
 * Cloud metadata endpoints. Each already falls in a blocked range (link-local, CGNAT,
 * unique-local); they are listed so the refusal names the real danger.
 */
const CLOUD_METADATA_ADDRESSES = new Map<string, string>([
  ['169.254.169.254', 'cloud metadata (AWS, GCP, Azure, ...)'],
  ['fd00:ec2::254', 'cloud metadata (AWS IPv6)'],
  ['100.100.100.200', 'cloud metadata (Alibaba Cloud)'],
]);

/**
 * IPv6 ranges whose last 32 bits carry an IPv4 address the packet is really bound for. They are
 * as safe or as dangerous as that IPv4 address, so they are classified by it.
 */
const IPV6_RANGES_EMBEDDING_IPV4_IN_LOW_BITS = new Set(['ipv4Mapped', 'rfc6145', 'rfc6052']);

/** Characters that can appear in any spelling of an IP address we are willing to interpret. */
const IP_LITERAL_CHARS = /^[0-9a-z.:%[\]]+$/i;

/**
 * Turns any spelling of an IP address into its canonical form, the way the WHATWG URL parser
 * (what `new URL()` does to a URL host) reads it: `127.1`, `2130706433`, `0x7f000001`,
 * `0177.0.0.1` and `127.0.0.1.` all become `127.0.0.1`; `[::ffff:127.0.0.1]` and `::127.0.0.1`
 * become `::ffff:7f00:1` and `::7f00:1`. Reusing the URL parser means classification and the
 * actual request can never read the same string differently.
 * Returns null for anything that is not an IP address (a host name, garbage).
 */
export function canonicalIp(spelling: string): { address: string; family: 4 | 6 } | null {
  let text = spelling.trim();
  if (!IP_LITERAL_CHARS.test(text)) return null;
  if (text.startsWith('[') && text.endsWith(']')) text = text.slice(1, -1);
  // A zone id (`fe80::1%eth0`) selects an interface, not an address; classify the address.
  const zoneAt = text.indexOf('%');
  if (zoneAt !== -1) text = text.slice(0, zoneAt);
  if (text.includes('[') || text.includes(']')) return null;
  let hostname: string;
  try {
    hostname = new URL(text.includes(':') ? `http://[${text}]/` : `http://${text}/`).hostname;
  } catch {
    return null;
  }
  if (hostname.startsWith('[')) hostname = hostname.slice(1, -1);
  const family = net.isIP(hostname);
  return family === 4 || family === 6 ? { address: hostname, family } : null;
}

/**
 * Decides whether an IP address may be fetched from. Public means globally routable unicast;
 * everything else (loopback, private, CGNAT, link-local, unique-local, multicast, unspecified,
 * broadcast, reserved, documentation, benchmarking, cloud metadata, ...) is blocked. It fails
 * closed: an unknown range or a string that is not an IP address is blocked.
 * Accepts the odd spellings `canonicalIp` does.
 */
export function classifyAddress(ip: string): AddressClassification {
  const canonical = canonicalIp(ip);
  if (canonical === null) return { verdict: 'blocked', reason: 'not an IP address' };
  if (canonical.family === 4) return classifyIpv4(ipaddr.IPv4.parse(canonical.address));
  return classifyIpv6(ipaddr.IPv6.parse(canonical.address));
}

function classifyIpv4(address: ipaddr.IPv4): AddressClassification {
  const metadata = CLOUD_METADATA_ADDRESSES.get(address.toString());
  if (metadata !== undefined) return { verdict: 'blocked', reason: metadata };
  const range = address.range();
  // Only plain unicast is public; as112 and amt are routable but nobody serves images there,
  // and blocking every named range keeps this correct when ipaddr.js learns a new one.
  return range === 'unicast' ? { verdict: 'public', reason: 'unicast' } : { verdict: 'blocked', reason: range };
}

function classifyIpv6(address: ipaddr.IPv6): AddressClassification {
  const metadata = CLOUD_METADATA_ADDRESSES.get(address.toString());
  if (metadata !== undefined) return { verdict: 'blocked', reason: metadata };
  const bytes = address.toByteArray();
  const range = address.range();
  if (range === 'unicast') {
    // ipaddr.js has no range for the deprecated IPv4-compatible block ::/96 (`::127.0.0.1`);
    // `::` and `::1` were matched above as unspecified and loopback. Nothing legitimate lives
    // there and some stacks still route it to the embedded IPv4 address: block it whole.
    if (bytes.slice(0, 12).every((b) => b === 0)) return { verdict: 'blocked', reason: 'IPv4-compatible IPv6 (deprecated)' };
    return { verdict: 'public', reason: 'unicast' };
  }
  if (IPV6_RANGES_EMBEDDING_IPV4_IN_LOW_BITS.has(range)) {
    // 64:ff9b:1::/48 is NAT64 for local use only (RFC 8215); ipaddr.js folds it into rfc6052.
    if (range === 'rfc6052' && !(bytes[4] === 0 && bytes[5] === 0)) {
      return { verdict: 'blocked', reason: 'local-use NAT64 (64:ff9b:1::/48)' };
    }
    return classifyEmbeddedIpv4(range, bytes.slice(12, 16));
  }
  if (range === '6to4') return classifyEmbeddedIpv4(range, bytes.slice(2, 6)); // 2002:AABB:CCDD::/48
  // Teredo hides its IPv4 endpoints (one XOR-ed); like every other named range, refuse it.
  return { verdict: 'blocked', reason: range };
}

function classifyEmbeddedIpv4(range: string, ipv4Bytes: number[]): AddressClassification {
  const embedded = new ipaddr.IPv4(ipv4Bytes);
  const inner = classifyIpv4(embedded);
  return { verdict: inner.verdict, reason: `${range} embedding ${embedded.toString()} (${inner.reason})` };
}

// ---------------------------------------------------------------------------------------------
// URL check
// ---------------------------------------------------------------------------------------------

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a host name to all its addresses (A and AAAA). */
export type ResolveHost = (hostname: string) => Promise<ResolvedAddress[]>;

/**
 * Replaceable collaborators, for tests only: production code passes nothing. Tests run offline
 * against servers on 127.0.0.1, so they need a resolver that maps made-up names, and (to test
 * that redirect targets are re-checked) a classifier that lets the first hop to 127.0.0.1 pass.
 */
export interface NetworkSeams {
  resolveHost?: ResolveHost;
  classify?: (ip: string) => AddressClassification;
}

export interface CheckedUrl {
  url: URL;
  /** The address that was checked; the connection must go there and nowhere else. */
  address: string;
  family: 4 | 6;
}

export interface UrlCheckOptions {
  allowPrivateNetwork: boolean;
  /** Names the URL in messages: `image_url` (default) or e.g. `callback URL`. */
  label?: string;
}

/** `dns.lookup` (getaddrinfo, so /etc/hosts counts) with every address, A and AAAA. */
const systemResolveHost: ResolveHost = (hostname) =>
  new Promise((resolve, reject) => {
    // `dns.lookup` is read at call time, not captured at import, so a test can guard it.
    dns.lookup(hostname, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

/**
 * Parses `rawUrl` and checks it may be fetched: http(s) only, no credentials, and (unless
 * `allowPrivateNetwork`) every address the host resolves to is public. Refusing when ANY address
 * is blocked matters: the OS may try them in any order. Returns the address to connect to.
 * Used for `image_url`, for each redirect target, and for callback URLs.
 * Throws CutoutError('invalid_request') with a message naming the problem.
 */
export async function assertPublicUrl(rawUrl: string, opts: UrlCheckOptions, seams: NetworkSeams = {}): Promise<CheckedUrl> {
  const label = opts.label ?? 'image_url';
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new CutoutError('invalid_request', `${label} is not a valid absolute URL.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CutoutError('invalid_request', `${label} must use http or https, not ${url.protocol.slice(0, -1)}.`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new CutoutError('invalid_request', `${label} must not contain credentials (user:password@).`);
  }

  // `new URL()` already rewrote numeric IPv4 spellings (`2130706433`, `0x7f.1`, ...) to dotted
  // quads and IPv6 to canonical form, so a literal is recognised here and never sent to DNS.
  const literal = canonicalIp(url.hostname);
  let addresses: ResolvedAddress[];
  if (literal !== null) {
    addresses = [literal];
  } else {
    try {
      addresses = await (seams.resolveHost ?? systemResolveHost)(url.hostname);
    } catch (err) {
      throw new CutoutError('invalid_request', `${label} host ${url.hostname} could not be resolved (${errorCode(err) ?? 'DNS error'}).`, { cause: err });
    }
    if (addresses.length === 0) throw new CutoutError('invalid_request', `${label} host ${url.hostname} has no address.`);
  }

  if (!opts.allowPrivateNetwork) {
    const classify = seams.classify ?? classifyAddress;
    for (const { address } of addresses) {
      const { verdict, reason } = classify(address);
      if (verdict === 'blocked') {
        // The reason, never the resolved address: the message must not map the internal network.
        throw new CutoutError(
          'invalid_request',
          `${label} host ${url.hostname} is not a public address: ${reason}. Only public http(s) URLs are allowed; `
            + 'for development and tests, start the server with --allow-private-network to reach loopback and private addresses.',
        );
      }
    }
  }

  const chosen = canonicalIp(addresses[0]!.address);
  if (chosen === null) throw new CutoutError('invalid_request', `${label} host ${url.hostname} resolved to an invalid address.`);
  return { url, address: chosen.address, family: chosen.family };
}

// ---------------------------------------------------------------------------------------------
// Fetching
// ---------------------------------------------------------------------------------------------

export interface FetchImageOptions {
  allowPrivateNetwork: boolean;
  /** Body cap in bytes; default LIMITS.maxInputBytes. */
  maxBytes?: number;
  /** Cap on the whole fetch (DNS, every redirect, the body) in ms; default LIMITS.fetchTimeoutMs. */
  timeoutMs?: number;
  /** Redirects followed; one more is refused. Default LIMITS.maxRedirects. */
  maxRedirects?: number;
  /** Names the URL in messages: `image_url` (default), `bg_image_url`. */
  label?: string;
  /**
   * Stops the download (DNS, the connection, the body) at once when it aborts, its socket closed,
   * and rejects with the signal's reason: a sync door passes its work's signal, so that a client
   * that hangs up, or the door's deadline, ends the download too (server/sync-removal.ts).
   */
  signal?: AbortSignal;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const USER_AGENT = 'cutout (+https://github.com/cutout/cutout)';

/**
 * Downloads an `image_url` and returns its bytes. Every hop is checked with `assertPublicUrl`
 * and the socket goes to the checked address. Failures are CutoutErrors: `image_too_large` over
 * `maxBytes`, otherwise `invalid_request` (refused URL, too many redirects, non-2xx status,
 * timeout, network error) with a one-line message.
 */
export async function fetchImageUrl(rawUrl: string, opts: FetchImageOptions, seams: NetworkSeams = {}): Promise<Buffer> {
  const label = opts.label ?? 'image_url';
  const maxBytes = opts.maxBytes ?? LIMITS.maxInputBytes;
  const maxRedirects = opts.maxRedirects ?? LIMITS.maxRedirects;
  const deadline = new Deadline(opts.timeoutMs ?? LIMITS.fetchTimeoutMs, label, opts.signal);
  let nextUrl = rawUrl;
  try {
    for (let redirectsFollowed = 0; ; redirectsFollowed++) {
      const target = await deadline.race(assertPublicUrl(nextUrl, { allowPrivateNetwork: opts.allowPrivateNetwork, label }, seams));
      const res = await sendRequest(target, { method: 'GET', headers: { accept: 'image/*', 'user-agent': USER_AGENT } }, deadline.signal);
      const status = res.statusCode ?? 0;
      if (REDIRECT_STATUSES.has(status)) {
        res.destroy(); // a redirect's body is never needed
        if (redirectsFollowed >= maxRedirects) {
          throw new CutoutError('invalid_request', `${label} redirected more than ${maxRedirects} times.`);
        }
        nextUrl = redirectLocation(res, target.url, label);
        continue;
      }
      if (status < 200 || status > 299) {
        res.destroy();
        throw new CutoutError('invalid_request', `${label} answered HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ''}; expected 2xx.`);
      }
      return await readCappedBody(res, maxBytes, label);
    }
  } catch (err) {
    // Name the hop that failed: after a redirect that is not the URL the client sent.
    throw deadline.explain(err, originOf(nextUrl));
  } finally {
    deadline.clear();
  }
}

export interface PostJsonOptions {
  allowPrivateNetwork: boolean;
  timeoutMs: number;
}

/**
 * POSTs `body` (JSON text) to a callback URL through the same checks and pinned connection as
 * `fetchImageUrl`. Redirects are not followed: a 3xx comes back as the status, since re-POSTing
 * a signed payload somewhere else is not what the receiver asked for. The response body is read
 * and discarded. Network failures and timeouts throw CutoutError('invalid_request') so the caller
 * can retry; any HTTP status, 2xx or not, resolves.
 */
export async function postJson(
  rawUrl: string,
  body: string,
  headers: Record<string, string>,
  opts: PostJsonOptions,
  seams: NetworkSeams = {},
): Promise<{ status: number }> {
  const label = 'callback URL';
  const deadline = new Deadline(opts.timeoutMs, label);
  try {
    const checked = await deadline.race(assertPublicUrl(rawUrl, { allowPrivateNetwork: opts.allowPrivateNetwork, label }, seams));
    const payload = Buffer.from(body, 'utf8');
    const res = await sendRequest(
      checked,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...headers, 'content-length': String(payload.length) },
        body: payload,
      },
      deadline.signal,
    );
    await discardBody(res);
    return { status: res.statusCode ?? 0 };
  } catch (err) {
    throw deadline.explain(err, originOf(rawUrl));
  } finally {
    deadline.clear();
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/**
 * One timer for a whole operation, and the caller's own signal beside it (a hang-up). `signal`
 * aborts in-flight requests on either; `race` bounds steps that take no signal (DNS); `explain`
 * turns whatever was thrown into the right error: the caller's reason when the caller stopped it,
 * else a CutoutError.
 */
class Deadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private readonly timeoutError: CutoutError;
  private readonly stopped: Promise<never>;
  private readonly onAbort: () => void;

  constructor(ms: number, label: string, private readonly caller?: AbortSignal) {
    this.timeoutError = new CutoutError('invalid_request', `${label} timed out after ${ms} ms.`);
    let rejectStopped!: (err: unknown) => void;
    this.stopped = new Promise<never>((_, reject) => (rejectStopped = reject));
    this.stopped.catch(() => {}); // only observed through race(); never an unhandled rejection
    this.timer = setTimeout(() => {
      rejectStopped(this.timeoutError);
      this.controller.abort(this.timeoutError);
    }, ms);
    this.onAbort = () => {
      clearTimeout(this.timer);
      rejectStopped(caller!.reason);
      this.controller.abort(caller!.reason);
    };
    if (caller?.aborted) this.onAbort();
    else caller?.addEventListener('abort', this.onAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  race<T>(work: Promise<T>): Promise<T> {
    return Promise.race([work, this.stopped]);
  }

  explain(err: unknown, where: string): unknown {
    if (this.caller?.aborted) return this.caller.reason;
    if (this.controller.signal.aborted) return this.timeoutError;
    if (err instanceof CutoutError) return err;
    return new CutoutError('invalid_request', `Could not reach ${where}: ${describeNetworkError(err)}.`, { cause: err });
  }

  clear(): void {
    clearTimeout(this.timer);
    this.caller?.removeEventListener('abort', this.onAbort);
  }
}

interface RequestSpec {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: Buffer;
}

/**
 * Sends one request to the checked address and resolves with the response head. The URL's host
 * name stays in the Host header and in TLS SNI / certificate verification; only the socket's
 * destination is pinned, through a `lookup` that answers with the checked address.
 */
function sendRequest(checked: CheckedUrl, spec: RequestSpec, signal: AbortSignal): Promise<http.IncomingMessage> {
  const { url, address, family } = checked;
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const isLiteral = net.isIP(hostname) !== 0;
  const pinnedLookup: net.LookupFunction = (_name, options, callback) => {
    // Node 20 asks for `all` when happy-eyeballs (autoSelectFamily) is on; answer both shapes.
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
  const options: https.RequestOptions = {
    method: spec.method,
    protocol: url.protocol,
    hostname,
    port: url.port === '' ? undefined : Number(url.port),
    path: `${url.pathname}${url.search}`,
    headers: { ...spec.headers, host: url.host },
    lookup: pinnedLookup,
    // SNI must be a name, never an IP literal; certificate checks use `hostname` either way.
    servername: isLiteral ? undefined : hostname,
    // A fresh agent: a pooled keep-alive socket could have been opened for an earlier request
    // under a different check (or none), and would bypass this one.
    agent: false,
    signal,
  };
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = transport.request(options, resolve);
    req.on('error', reject);
    req.end(spec.body);
  });
}

/** Reads the body, refusing by Content-Length before reading and by counting while streaming. */
function readCappedBody(res: http.IncomingMessage, maxBytes: number, label: string): Promise<Buffer> {
  const tooLarge = () => new CutoutError('image_too_large', `${label} body is over the ${formatBytes(maxBytes)} limit.`);
  const declared = res.headers['content-length'];
  if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > maxBytes) {
    res.destroy();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      res.destroy();
      reject(err);
    };
    res.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) fail(tooLarge());
      else chunks.push(chunk);
    });
    res.on('end', () => {
      if (settled) return;
      settled = true;
      resolve(Buffer.concat(chunks, received));
    });
    res.on('error', fail);
    // A body cut short of its Content-Length must not pass as a (truncated) image. Node 20 reports
    // it as an 'error' already; 'close' on an incomplete message is the guarantee.
    res.on('close', () => {
      if (!res.complete) fail(Object.assign(new Error('connection closed before the body was complete'), { code: 'ECONNRESET' }));
    });
  });
}

function discardBody(res: http.IncomingMessage): Promise<void> {
  return new Promise((resolve, reject) => {
    res.on('end', resolve);
    res.on('error', reject);
    res.resume();
  });
}

function redirectLocation(res: http.IncomingMessage, base: URL, label: string): string {
  const location = res.headers.location;
  if (location === undefined || location === '') {
    throw new CutoutError('invalid_request', `${label} answered HTTP ${res.statusCode} without a Location header.`);
  }
  try {
    return new URL(location, base).href;
  } catch {
    throw new CutoutError('invalid_request', `${label} redirected to an invalid URL.`);
  }
}

/** Scheme, host and port of a URL for error messages: no path, query or credentials. */
function originOf(rawUrl: string): string {
  try {
    const url = new URL(rawUrl);
    return `${url.protocol}//${url.host}`;
  } catch {
    return 'the URL';
  }
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

const NETWORK_ERROR_TEXT: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the server',
  EPIPE: 'connection closed by the server',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'temporary DNS failure',
};

function describeNetworkError(err: unknown): string {
  const code = errorCode(err);
  if (code !== undefined) {
    if (code in NETWORK_ERROR_TEXT) return NETWORK_ERROR_TEXT[code]!;
    if (code.startsWith('HPE_')) return 'malformed HTTP response';
    if (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) {
      return `TLS failure (${code})`;
    }
    return `network error (${code})`;
  }
  return 'network error';
}

function formatBytes(bytes: number): string {
  if (bytes >= MB && bytes % MB === 0) return formatMB(bytes);
  return `${bytes} bytes`;
}
