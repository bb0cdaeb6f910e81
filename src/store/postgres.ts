/**
 * The PostgreSQL engine: a node-postgres Pool shared by the process. Statements keep the store's
 * `?` placeholders and are numbered `$1, $2, ...` here; BIGINT and NUMERIC come back as numbers
 * (times are ms since the epoch and counts are small, far below 2^53). A transaction takes one
 * client from the pool for its whole life and is retried when PostgreSQL picks it as the victim
 * of a deadlock or a serialization failure (nothing of it was committed).
 *
 * A database that stops answering (frozen, partitioned, restarting) never hangs a caller: every
 * statement has a timeout of its own (`query_timeout`, kept by node-postgres, and the shorter
 * `statement_timeout`, kept by PostgreSQL), waiting for a connection is bounded
 * (`connectionTimeoutMillis`, which covers a full pool too), TCP keepalive finds a peer gone
 * without a word, and the failures that mean "unavailable" reach the caller as StoreUnavailable
 * (503 with Retry-After). A connection that timed out is dropped, never reused: its statement may
 * still be waiting in the database.
 */
import pg from 'pg';
import { LIMITS } from '../limits.js';
import { POSTGRES_NOW_MS } from './clock.js';
import { StoreUnavailable, type Db, type Dialect, type Queryable, type Row, type SqlParam } from './sql.js';

const POSTGRES: Dialect = Object.freeze({
  kind: 'postgres', forUpdate: ' FOR UPDATE', skipLocked: ' FOR UPDATE SKIP LOCKED', forNoKeyUpdate: ' FOR NO KEY UPDATE', nowMs: POSTGRES_NOW_MS,
});

/** SQLSTATE classes and codes meaning the database cannot serve now (not that the statement is wrong). */
const UNAVAILABLE_SQLSTATE = /^(08|57P0[1-4]|57014|53300)/;
/** Socket errors on the way to the database. */
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND']);
/** node-postgres's and pg-pool's own words for a timeout or a lost connection. */
const UNAVAILABLE_MESSAGE = /^(Query read timeout|timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error|Client was closed)/;

/** Whether `err` says the database is unreachable or too slow, rather than that the statement failed. */
export function isUnavailable(err: unknown): boolean {
  if (err instanceof StoreUnavailable) return true;
  const e = err as { code?: unknown; message?: unknown } | null;
  if (!e) return false;
  if (typeof e.code === 'string' && (UNAVAILABLE_ERRNO.has(e.code) || (/^[0-9A-Z]{5}$/.test(e.code) && UNAVAILABLE_SQLSTATE.test(e.code)))) return true;
  return typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message);
}

/** `err` as the caller should see it: StoreUnavailable when the database could not serve. */
function unavailableOr(err: unknown): unknown {
  return isUnavailable(err) && !(err instanceof StoreUnavailable) ? new StoreUnavailable(err) : err;
}

const INT8_OID = 20;
const NUMERIC_OID = 1700;

/** Number BIGINT (COUNT, SUM, ms times) and NUMERIC (SUM of BIGINT); everything else as pg does. */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID || oid === NUMERIC_OID) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

/** `?` -> `$n`, outside quoted strings and identifiers. */
export function numberPlaceholders(sql: string): string {
  let out = '';
  let n = 0;
  let quote: string | null = null;
  for (const ch of sql) {
    if (quote) {
      if (ch === quote) quote = null;
      out += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else if (ch === '?') {
      out += `$${++n}`;
    } else {
      out += ch;
    }
  }
  return out;
}

function over(client: pg.Pool | pg.PoolClient | pg.Client): Queryable {
  const query = async (sql: string, params: SqlParam[] = []) => {
    try {
      return await client.query(numberPlaceholders(sql), params as unknown[]);
    } catch (err) {
      throw unavailableOr(err);
    }
  };
  return {
    dialect: POSTGRES,
    get: async <T = Row>(sql: string, params?: SqlParam[]) => (await query(sql, params)).rows[0] as T | undefined,
    all: async <T = Row>(sql: string, params?: SqlParam[]) => (await query(sql, params)).rows as T[],
    run: async (sql: string, params?: SqlParam[]) => ({ changes: (await query(sql, params)).rowCount ?? 0 }),
  };
}

/** SQLSTATEs after which a transaction may simply run again. */
const RETRYABLE = new Set(['40001', '40P01']);

export class PostgresDb implements Db {
  readonly dialect = POSTGRES;
  private readonly direct: Queryable;

  /** Connections held for LISTEN, one per channel (a pooled client cannot keep a LISTEN). */
  private readonly listeners = new Map<string, pg.Client>();
  private closed = false;

  private constructor(readonly pool: pg.Pool, private readonly url: string) {
    this.direct = over(pool);
  }

  /** How every connection is made: bounded, and with TCP keepalive (a peer gone silently is found). */
  private static connection(url: string, name: string): pg.ClientConfig {
    return {
      connectionString: url,
      types,
      connectionTimeoutMillis: LIMITS.postgresConnectTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: LIMITS.postgresKeepAliveDelayMs,
      application_name: name,
    };
  }

  /** Connects (one round trip, so a wrong URL fails here and not on the first request). */
  static async open(url: string): Promise<PostgresDb> {
    const pool = new pg.Pool({
      ...PostgresDb.connection(url, 'cutout'),
      max: LIMITS.postgresPoolSize,
      query_timeout: LIMITS.postgresQueryTimeoutMs,
      statement_timeout: LIMITS.postgresStatementTimeoutMs,
    });
    // An idle client that loses its server (a restart of PostgreSQL) must not crash the process.
    pool.on('error', () => undefined);
    try {
      await pool.query('SELECT 1');
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    return new PostgresDb(pool, url);
  }

  get<T = Row>(sql: string, params?: SqlParam[]): Promise<T | undefined> { return this.direct.get<T>(sql, params); }
  all<T = Row>(sql: string, params?: SqlParam[]): Promise<T[]> { return this.direct.all<T>(sql, params); }
  run(sql: string, params?: SqlParam[]): Promise<{ changes: number }> { return this.direct.run(sql, params); }

  /**
   * A client checked out of the pool, with an 'error' listener for as long as it is out: the
   * pool listens only to idle clients, and a client whose server goes away (a restart, a
   * failover, pg_terminate_backend) emits 'error', which with no listener is an uncaught
   * exception that ends the process. `done()` gives it back, destroyed if it broke.
   */
  private async checkout(): Promise<{ client: pg.PoolClient; fail(err: Error): void; done(): void }> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw unavailableOr(err);
    }
    let broken: Error | undefined;
    const onError = (err: Error) => { broken ??= err; };
    client.on('error', onError);
    return {
      client,
      fail: (err) => { broken ??= err; },
      done: () => {
        client.removeListener('error', onError);
        client.release(broken);
      },
    };
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const { client, fail, done } = await this.checkout();
      const tx = over(client);
      try {
        await tx.run('BEGIN');
        try {
          const value = await fn(tx);
          await tx.run('COMMIT');
          return value;
        } catch (err) {
          if (isUnavailable(err)) {
            // The connection may still have a statement waiting in the database: drop it (which
            // rolls the transaction back) rather than queue a ROLLBACK behind it.
            fail(err as Error);
            throw err;
          }
          await client.query('ROLLBACK').catch(fail);
          const code = (err as { code?: string }).code;
          if (code && RETRYABLE.has(code) && attempt < 3) continue;
          throw err;
        }
      } finally {
        done();
      }
    }
  }

  /**
   * Runs `fn` on a connection of its own holding a session advisory lock (migrations at start).
   * No statement timeout there: waiting for another server's migration, or building an index of a
   * large table, may take longer than any request should. The connection ends with `fn`, and the
   * lock with it.
   */
  async withAdvisoryLock<T>(key: number, fn: (q: Queryable) => Promise<T>): Promise<T> {
    const client = new pg.Client(PostgresDb.connection(this.url, 'cutout-migrate'));
    client.on('error', () => undefined); // surfaces as the failure of the statement in flight
    try {
      await client.connect();
      await client.query('SELECT pg_advisory_lock($1)', [key]);
      return await fn(over(client));
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async notify(channel: string): Promise<void> {
    await this.direct.run('SELECT pg_notify(?, ?)', [channel, '']).catch(() => undefined);
  }

  /**
   * LISTEN on a connection of its own, connected again after LIMITS.postgresListenRetryMs when
   * PostgreSQL drops it (a restart, a failover): a notification missed meanwhile only waits for
   * the listener's next sweep. The connection is idle by nature, so a peer gone without a word (a
   * frozen database, a network path that drops packets) would go unnoticed: TCP keepalive, and a
   * trivial query every LIMITS.postgresListenCheckMs that must answer within
   * LIMITS.postgresListenCheckTimeoutMs, replace it. Never fails the caller.
   */
  async listen(channel: string, onNotify: () => void): Promise<void> {
    const later = () => { if (!this.closed) setTimeout(() => void connect(), LIMITS.postgresListenRetryMs).unref(); };
    const connect = async (): Promise<void> => {
      if (this.closed) return;
      const client = new pg.Client(PostgresDb.connection(this.url, 'cutout-listen'));
      let lost = false;
      let check: NodeJS.Timeout | undefined;
      const onLost = () => {
        if (lost) return;
        lost = true;
        clearInterval(check);
        if (this.listeners.get(channel) === client) this.listeners.delete(channel);
        // Destroyed, not ended: a silent peer would never answer the goodbye.
        (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
        client.end().catch(() => undefined);
        later();
      };
      client.on('error', onLost);
      client.on('end', onLost);
      client.on('notification', (n) => { if (n.channel === channel) onNotify(); });
      try {
        await client.connect();
        await client.query(`LISTEN "${channel.replace(/"/g, '""')}"`);
      } catch {
        onLost();
        return;
      }
      if (this.closed) {
        lost = true; // closed while connecting: this connection must not outlive the store
        await client.end().catch(() => undefined);
        return;
      }
      this.listeners.set(channel, client);
      check = setInterval(() => {
        // query_timeout per query is node-postgres's, missing from its types.
        client.query({ text: 'SELECT 1', query_timeout: LIMITS.postgresListenCheckTimeoutMs } as pg.QueryConfig).catch(onLost);
      }, LIMITS.postgresListenCheckMs);
      check.unref();
    };
    await connect();
  }

  async close(): Promise<void> {
    // Set first: the listeners' 'end' must not schedule a new connection.
    this.closed = true;
    await Promise.all([...this.listeners.values()].map((c) => c.end().catch(() => undefined)));
    this.listeners.clear();
    await this.pool.end();
  }
}
