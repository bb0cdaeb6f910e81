/**
 * A promise face over one sqlite3 connection. Every statement and every transaction goes through
 * one queue: on a single connection, a statement issued while another caller's transaction is
 * open would silently join (and roll back with) that transaction, so nothing may interleave.
 * Statements are sub-millisecond; no caller awaits inference or the network inside a transaction.
 */
import type { Database, RunResult } from 'sqlite3';
import { requireCjs } from '../cjs.js';
import type { Db, Dialect, Queryable, Row, SqlParam } from './sql.js';

const sqlite3 = requireCjs('sqlite3') as typeof import('sqlite3');

export type { Queryable, Row, SqlParam } from './sql.js';

/** One connection and BEGIN IMMEDIATE: every writing transaction already runs alone. */
const SQLITE: Dialect = Object.freeze({ kind: 'sqlite', forUpdate: '', skipLocked: '', forNoKeyUpdate: '', nowMs: null });

function rawGet<T>(db: Database, sql: string, params: SqlParam[] = []): Promise<T | undefined> {
  return new Promise((resolve, reject) => db.get(sql, params, (err: Error | null, row: T) => (err ? reject(err) : resolve(row))));
}

function rawAll<T>(db: Database, sql: string, params: SqlParam[] = []): Promise<T[]> {
  return new Promise((resolve, reject) => db.all(sql, params, (err: Error | null, rows: T[]) => (err ? reject(err) : resolve(rows))));
}

function rawRun(db: Database, sql: string, params: SqlParam[] = []): Promise<{ changes: number; lastID: number }> {
  return new Promise((resolve, reject) =>
    db.run(sql, params, function (this: RunResult, err: Error | null) {
      if (err) reject(err);
      else resolve({ changes: this.changes, lastID: this.lastID });
    }),
  );
}

function rawExec(db: Database, sql: string): Promise<void> {
  return new Promise((resolve, reject) => db.exec(sql, (err: Error | null) => (err ? reject(err) : resolve())));
}

export class SqliteDb implements Db {
  readonly dialect = SQLITE;
  private tail: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(private readonly db: Database) {}

  /** Opens (creating) the file with WAL, a busy timeout for other processes (CLI + server), and foreign keys. */
  static async open(file: string): Promise<SqliteDb> {
    const db = await new Promise<Database>((resolve, reject) => {
      const d = new sqlite3.Database(file, sqlite3.OPEN_READWRITE | sqlite3.OPEN_CREATE, (err) => (err ? reject(err) : resolve(d)));
    });
    // Another process (a `cutout keys create` beside a running server) may hold the write lock briefly.
    db.configure('busyTimeout', 5000);
    await rawExec(db, 'PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;');
    return new SqliteDb(db);
  }

  /** Runs `fn` after everything queued before it; the queue keeps going when `fn` fails. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('The store is closed'));
    const result = this.tail.then(fn, fn);
    this.tail = result.catch(() => undefined);
    return result;
  }

  private readonly direct: Queryable = {
    dialect: SQLITE,
    get: (sql, params) => rawGet(this.db, sql, params),
    all: (sql, params) => rawAll(this.db, sql, params),
    run: (sql, params) => rawRun(this.db, sql, params),
  };

  get<T = Row>(sql: string, params?: SqlParam[]): Promise<T | undefined> {
    return this.exclusive(() => rawGet<T>(this.db, sql, params));
  }

  all<T = Row>(sql: string, params?: SqlParam[]): Promise<T[]> {
    return this.exclusive(() => rawAll<T>(this.db, sql, params));
  }

  run(sql: string, params?: SqlParam[]): Promise<{ changes: number; lastID: number }> {
    return this.exclusive(() => rawRun(this.db, sql, params));
  }

  /** Runs a script of several statements (migrations), queued like everything else. */
  exec(sql: string): Promise<void> {
    return this.exclusive(() => rawExec(this.db, sql));
  }

  /**
   * Runs `fn` in one transaction: committed when it resolves, rolled back when it throws (and the
   * error rethrown). BEGIN IMMEDIATE takes the write lock up front, so two processes never both
   * read a balance and then both charge it. `fn` must use the `tx` it is given, not the store.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.exclusive(async () => {
      await rawExec(this.db, 'BEGIN IMMEDIATE');
      try {
        const value = await fn(this.direct);
        await rawExec(this.db, 'COMMIT');
        return value;
      } catch (err) {
        await rawExec(this.db, 'ROLLBACK').catch(() => undefined);
        throw err;
      }
    });
  }

  /** Waits for queued work, then closes the connection. */
  /** One SQLite file serves one host; the servers on it find new work by their sweep. */
  async notify(): Promise<void> {}
  async listen(): Promise<void> {}

  close(): Promise<void> {
    const done = this.exclusive(
      () => new Promise<void>((resolve, reject) => this.db.close((err) => (err ? reject(err) : resolve()))),
    );
    this.closed = true;
    return done;
  }
}
