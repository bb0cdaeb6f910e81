/**
 * A preload for the fleet bench (`node --import .../store-probe.js`), never loaded by cutout itself:
 * it counts the statements a `cutout serve` process sends to its store and the milliseconds they
 * take, at the drivers (sqlite3's Database and pg's Client), so the count is the same whichever
 * store implementation is in use and needs no hook in src/store/. On SIGUSR2 (and at exit) it
 * writes the running totals as JSON to $CUTOUT_BENCH_PROBE_FILE.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';

interface Totals {
  statements: number;
  ms: number;
  /** By the statement's first keyword (SELECT, INSERT, UPDATE, DELETE, BEGIN, COMMIT, ...). */
  byKind: Record<string, number>;
  /** How many times the totals were written (the bench waits for it to move). */
  seq: number;
}

const totals: Totals = { statements: 0, ms: 0, byKind: {}, seq: 0 };
const file = process.env.CUTOUT_BENCH_PROBE_FILE;

function record(sql: unknown, startedAt: number): void {
  totals.statements++;
  totals.ms += performance.now() - startedAt;
  const text = typeof sql === 'string' ? sql : typeof (sql as { text?: unknown })?.text === 'string' ? (sql as { text: string }).text : '';
  const kind = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? 'OTHER';
  totals.byKind[kind] = (totals.byKind[kind] ?? 0) + 1;
}

type AnyFn = (...args: unknown[]) => unknown;

/** Wraps a callback-last method: the time runs from the call to its callback. */
function wrapCallbackMethod(proto: Record<string, AnyFn>, name: string): void {
  const original = proto[name];
  if (typeof original !== 'function') return;
  proto[name] = function (this: unknown, ...args: unknown[]) {
    const startedAt = performance.now();
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as AnyFn;
      args[last] = function (this: unknown, ...cbArgs: unknown[]) {
        record(args[0], startedAt);
        return callback.apply(this, cbArgs);
      };
      return original.apply(this, args);
    }
    const out = original.apply(this, args);
    if (out && typeof (out as Promise<unknown>).then === 'function') {
      (out as Promise<unknown>).then(() => record(args[0], startedAt), () => record(args[0], startedAt));
    } else {
      record(args[0], startedAt);
    }
    return out;
  };
}

const require = createRequire(import.meta.url);
try {
  const sqlite3 = require('sqlite3') as { Database: { prototype: Record<string, AnyFn> } };
  for (const m of ['run', 'get', 'all', 'exec']) wrapCallbackMethod(sqlite3.Database.prototype, m);
} catch {
  // not installed: nothing to count
}
try {
  const pg = require('pg') as { Client: { prototype: Record<string, AnyFn> } };
  wrapCallbackMethod(pg.Client.prototype, 'query');
} catch {
  // not installed: nothing to count
}

function dump(): void {
  if (!file) return;
  totals.seq++;
  fs.writeFileSync(file, JSON.stringify(totals));
}
process.on('SIGUSR2', dump);
process.on('exit', dump);
