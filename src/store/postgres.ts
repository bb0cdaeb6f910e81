/**
 * The PostgreSQL engine: a node-postgres Pool shared by the process. Statements keep the store's
 * `?` placeholders and are numbered `$1, $2, ...` here; BIGINT and NUMERIC come back as numbers
 * (times are ms since the epoch and counts are small, far below 2^53). A transaction takes one
 * client from the pool for its whole life and is retried when PostgreSQL picks it as the victim
 * of a deadlock or a serialization failure (nothing of it was committed).
 */
import pg from 'pg';
import { LIMITS } from '../limits.js';
import type { Db, Dialect, Queryable, Row, SqlParam } from './sql.js';

const POSTGRES: Dialect = Object.freeze({ kind: 'postgres', forUpdate: ' FOR UPDATE', skipLocked: ' FOR UPDATE SKIP LOCKED', forNoKeyUpdate: ' FOR NO KEY UPDATE' });

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

function over(client: pg.Pool | pg.PoolClient): Queryable {
  const query = async (sql: string, params: SqlParam[] = []) => client.query(numberPlaceholders(sql), params as unknown[]);
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

  /** Connects (one round trip, so a wrong URL fails here and not on the first request). */
  static async open(url: string): Promise<PostgresDb> {
    const pool = new pg.Pool({
      connectionString: url,
      max: LIMITS.postgresPoolSize,
      types,
      connectionTimeoutMillis: LIMITS.postgresConnectTimeoutMs,
      application_name: 'cutout',
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
    const client = await this.pool.connect();
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
      try {
        await client.query('BEGIN');
        try {
          const value = await fn(over(client));
          await client.query('COMMIT');
          return value;
        } catch (err) {
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

  /** Runs `fn` on one client holding a session advisory lock (migrations at start). */
  async withAdvisoryLock<T>(key: number, fn: (q: Queryable) => Promise<T>): Promise<T> {
    const { client, fail, done } = await this.checkout();
    try {
      await client.query('SELECT pg_advisory_lock($1)', [key]);
      try {
        return await fn(over(client));
      } finally {
        // A client that cannot unlock is destroyed: its session, and so the lock, ends with it.
        await client.query('SELECT pg_advisory_unlock($1)', [key]).catch(fail);
      }
    } finally {
      done();
    }
  }

  async notify(channel: string): Promise<void> {
    await this.direct.run('SELECT pg_notify(?, ?)', [channel, '']).catch(() => undefined);
  }

  /**
   * LISTEN on a connection of its own, connected again after LIMITS.postgresListenRetryMs when
   * PostgreSQL drops it (a restart, a failover): a notification missed meanwhile only waits for
   * the listener's next sweep. Never fails the caller.
   */
  async listen(channel: string, onNotify: () => void): Promise<void> {
    const later = () => { if (!this.closed) setTimeout(() => void connect(), LIMITS.postgresListenRetryMs).unref(); };
    const connect = async (): Promise<void> => {
      if (this.closed) return;
      const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: LIMITS.postgresConnectTimeoutMs, application_name: 'cutout-listen' });
      let lost = false;
      const onLost = () => {
        if (lost) return;
        lost = true;
        if (this.listeners.get(channel) === client) this.listeners.delete(channel);
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
