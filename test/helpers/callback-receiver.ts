/** A real callback receiver on 127.0.0.1 for the job tests: records every POST, answers as told. */
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  /** The raw body, as signed. */
  raw: Buffer;
  json: any;
  headers: http.IncomingHttpHeaders;
  /** Attempt number for this path, from 1. */
  n: number;
  at: number;
  /** What the receiver answered. */
  status: number;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Changes the answer of later requests: (path, attempt number for that path) -> status. */
  respond: (path: string, n: number) => number;
  /** Resolves with the matching requests once `count` of them have arrived. */
  waitFor(match: (r: Received) => boolean, count?: number, timeoutMs?: number): Promise<Received[]>;
}

export async function startReceiver(t: Tap.Test, respond: (path: string, n: number) => number = () => 200): Promise<Receiver> {
  const counts = new Map<string, number>();
  const receiver: Receiver = {
    url: '',
    received: [],
    respond,
    async waitFor(match, count = 1, timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const hits = receiver.received.filter(match);
        if (hits.length >= count) return hits;
        if (Date.now() > until) throw new Error(`waited ${timeoutMs} ms for ${count} callbacks, got ${hits.length}: ${JSON.stringify(receiver.received.map((r) => [r.path, r.json?.job_id, r.status]))}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const path = req.url ?? '/';
      const n = (counts.get(path) ?? 0) + 1;
      counts.set(path, n);
      const status = receiver.respond(path, n);
      let json: unknown = null;
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        // recorded as null
      }
      receiver.received.push({ path, raw, json, headers: req.headers, n, at: Date.now(), status });
      res.writeHead(status, { 'Content-Type': 'text/plain' }).end(status < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  return receiver;
}

/** What a receiver should do: recompute the HMAC of the raw body and compare in constant time. */
export function signatureValid(r: Received, secret: string): boolean {
  const header = r.headers['x-service-signature'];
  if (typeof header !== 'string' || !header.startsWith('sha256=')) return false;
  const expected = Buffer.from(crypto.createHmac('sha256', secret).update(r.raw).digest('hex'));
  const given = Buffer.from(header.slice('sha256='.length));
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}
