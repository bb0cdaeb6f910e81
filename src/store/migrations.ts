/**
 * The schema, as an ordered list of migrations. PRAGMA user_version holds how many have run;
 * opening a store runs the rest, each in its own transaction. Append new migrations; never edit
 * one that has shipped. Times are integer milliseconds since the epoch (UTC).
 */
import type { SqliteDb } from './sqlite.js';
import { splitStatements } from './split.js';

export const MIGRATIONS: readonly string[] = [
  // 1: accounts, keys, the credit ledger, runs, results, idempotency, jobs and callbacks.
  `
  CREATE TABLE accounts (
    id               TEXT PRIMARY KEY,                -- acct_<hex>
    plan             TEXT NOT NULL DEFAULT 'free',    -- free | paid | marketplace
    test             INTEGER NOT NULL DEFAULT 0,      -- opened by a test key
    marketplace_user TEXT UNIQUE,                     -- X-Marketplace-User this account stands for
    created_at       INTEGER NOT NULL
  );

  CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,                      -- key_<hex>, safe to show and log
    account_id TEXT NOT NULL REFERENCES accounts(id),
    name       TEXT,
    kind       TEXT NOT NULL CHECK (kind IN ('live', 'test')),
    hash       TEXT NOT NULL UNIQUE,                  -- sha256 hex of the whole key; the key itself is never stored
    hint       TEXT NOT NULL,                         -- last 4 characters, to tell keys apart in a listing
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
  );
  CREATE INDEX api_keys_account ON api_keys(account_id);

  -- One row per grant and per charge; a balance is SUM(delta). Rows are never updated.
  CREATE TABLE ledger (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    delta      INTEGER NOT NULL,
    reason     TEXT NOT NULL CHECK (reason IN ('free_grant', 'purchase', 'charge')),
    ref        TEXT,                                  -- the run id of a charge
    created_at INTEGER NOT NULL
  );
  CREATE INDEX ledger_account ON ledger(account_id, created_at);
  -- A run is charged at most once, whatever happens above.
  CREATE UNIQUE INDEX ledger_one_charge_per_run ON ledger(ref) WHERE reason = 'charge';

  -- Every removal, local or remote, charged or free: the source of usage.
  CREATE TABLE runs (
    id         TEXT PRIMARY KEY,                      -- UUID; also the result's job_id
    account_id TEXT REFERENCES accounts(id),          -- NULL: a local CLI run without --key
    key_id     TEXT REFERENCES api_keys(id),
    channel    TEXT NOT NULL CHECK (channel IN ('cli', 'api', 'job')),
    input      TEXT,                                  -- a description (file name, url host, "upload")
    size       TEXT NOT NULL CHECK (size IN ('preview', 'full')),
    credits    INTEGER NOT NULL CHECK (credits IN (0, 1)),
    ms         INTEGER NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX runs_account_time ON runs(account_id, created_at);

  -- Stored results, downloadable without auth until they expire.
  CREATE TABLE results (
    job_id       TEXT PRIMARY KEY,
    path         TEXT NOT NULL,
    content_type TEXT NOT NULL,
    width        INTEGER NOT NULL,
    height       INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
  );
  CREATE INDEX results_created ON results(created_at);

  -- Idempotency-Key: a pending row claims the key; a done row holds what to replay.
  CREATE TABLE idempotency_keys (
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    endpoint    TEXT NOT NULL,                        -- 'remove', 'jobs', ...
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,                        -- sha256 of the parameters and the input
    state       TEXT NOT NULL CHECK (state IN ('pending', 'done')),
    response    TEXT,                                 -- JSON, when done
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (account_id, endpoint, key)
  );
  CREATE INDEX idempotency_created ON idempotency_keys(created_at);

  CREATE TABLE jobs (
    id                TEXT PRIMARY KEY,               -- UUID v4, the job_id
    account_id        TEXT NOT NULL REFERENCES accounts(id),
    key_id            TEXT REFERENCES api_keys(id),
    status            TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'done', 'failed')),
    params            TEXT NOT NULL,                  -- JSON of the parsed image options
    input_path        TEXT,                           -- the input bytes, kept in the data directory until done
    callback_url      TEXT,
    error             TEXT,                           -- JSON error body, when failed
    credits_charged   INTEGER,
    credits_remaining INTEGER,
    lease_until       INTEGER,                        -- a processing job whose lease ran out goes back to queued
    attempts          INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    finished_at       INTEGER
  );
  CREATE INDEX jobs_status ON jobs(status, created_at);
  CREATE INDEX jobs_account ON jobs(account_id, created_at);

  CREATE TABLE callback_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id          TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    body            TEXT NOT NULL,                    -- the exact bytes signed and sent
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    delivered_at    INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL
  );
  CREATE INDEX callback_deliveries_due ON callback_deliveries(delivered_at, next_attempt_at);
  `,
  // 2: what a queued job needs to run after a restart, and callbacks that were given up.
  `
  ALTER TABLE jobs ADD COLUMN source_kind TEXT;                -- image_file | image_file_b64 | image_url
  ALTER TABLE jobs ADD COLUMN source_url TEXT;                 -- the image_url, fetched when the job runs
  ALTER TABLE jobs ADD COLUMN input_desc TEXT;                 -- description of the input for the run record
  ALTER TABLE jobs ADD COLUMN billable INTEGER NOT NULL DEFAULT 1; -- 0: test key or marketplace caller, never charged
  ALTER TABLE jobs ADD COLUMN batch_id TEXT;                   -- the batch a job was created in, if any
  CREATE INDEX jobs_lease ON jobs(status, lease_until);
  ALTER TABLE callback_deliveries ADD COLUMN gave_up_at INTEGER; -- retries exhausted or a final (non-5xx) refusal
  `,
  // 3: which server process holds a pending Idempotency-Key claim, so a claim left by a process
  // that died is dropped at once, and a live one of another server on the same data directory is kept.
  `
  ALTER TABLE idempotency_keys ADD COLUMN owner_pid INTEGER;   -- pid of the process holding a pending claim
  `,
  // 4: the fleet's columns and tables, kept the same on both engines (see migrations-postgres.ts):
  // who holds a claim (a server identity), callback attempts claimed under a lease, the rate
  // limit's windows, and the servers' heartbeats.
  `
  ALTER TABLE jobs ADD COLUMN lease_owner TEXT;                -- server identity holding the claim
  ALTER TABLE idempotency_keys ADD COLUMN owner TEXT;          -- server identity holding a pending claim
  ALTER TABLE callback_deliveries ADD COLUMN lease_owner TEXT; -- server sending the current attempt
  ALTER TABLE callback_deliveries ADD COLUMN lease_until INTEGER;
  CREATE TABLE rate_windows (
    rate_key   TEXT PRIMARY KEY,                      -- key:<id> or marketplace:<user>
    hits       TEXT NOT NULL,                         -- JSON array of the request times (ms) in the window
    updated_at INTEGER NOT NULL
  );
  CREATE TABLE servers (
    id           TEXT PRIMARY KEY,                    -- host:pid:start:random (src/identity.ts)
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    lease_ms     INTEGER NOT NULL                     -- silent longer than this: gone
  );
  `,
  // 5: claims that ended in an inference outage (an upstream down), which must not count towards
  // the attempts after which an interrupted job is failed (kept the same on both engines).
  `
  ALTER TABLE jobs ADD COLUMN outages INTEGER NOT NULL DEFAULT 0; -- claims handed back because inference was unavailable
  `,
  // 6: what a done job's result says of itself (result-fields.ts: confidence, ...), as one JSON
  // object, so that the next field needs no migration (kept the same on both engines).
  `
  ALTER TABLE jobs ADD COLUMN result_fields TEXT;
  `,
  // 7: room in runs: a charge of any whole number of credits (a price that is not 0 or 1), and any
  // channel (a dialect of its own). SQLite drops a CHECK only by rebuilding the table.
  `
  CREATE TABLE runs_new (
    id         TEXT PRIMARY KEY,
    account_id TEXT REFERENCES accounts(id),
    key_id     TEXT REFERENCES api_keys(id),
    channel    TEXT NOT NULL,
    input      TEXT,
    size       TEXT NOT NULL CHECK (size IN ('preview', 'full')),
    credits    INTEGER NOT NULL CHECK (credits >= 0),
    ms         INTEGER NOT NULL,
    created_at INTEGER NOT NULL
  );
  INSERT INTO runs_new (id, account_id, key_id, channel, input, size, credits, ms, created_at)
    SELECT id, account_id, key_id, channel, input, size, credits, ms, created_at FROM runs;
  DROP TABLE runs;
  ALTER TABLE runs_new RENAME TO runs;
  CREATE INDEX runs_account_time ON runs(account_id, created_at);
  `,
  // 8: the rate limit in one statement (rate-limit.ts): requests refused since the key's last
  // admitted one, which the upsert returns to say whether this request was admitted. The log in
  // \`hits\` keeps its shape (a JSON array of ms, ascending), so windows open now carry over.
  `
  ALTER TABLE rate_windows ADD COLUMN refused INTEGER NOT NULL DEFAULT 0;
  `,
  // 9: what a stored result says of itself (result-fields.ts: size, the subject's box, confidence,
  // time), as one JSON object like the jobs' column of 6 (kept the same on both engines).
  `
  ALTER TABLE results ADD COLUMN result_fields TEXT;
  `,
  // 10: the W3C traceparent of the request that created a job, and of the job's run on its
  // callback, so that the work done later (on any server) joins that request's trace
  // (src/telemetry/); NULL when tracing was off.
  `
  ALTER TABLE jobs ADD COLUMN traceparent TEXT;
  ALTER TABLE callback_deliveries ADD COLUMN traceparent TEXT;
  `,
  // 11: operating cutout for others (issue 56, kept the same on both engines): a key's expiry,
  // its own rate limit and labels; a credit change's stated reason and corrections (a CHECK that
  // SQLite drops only by rebuilding the table); and the audit trail, append-only by triggers, so
  // that no statement of any program on this file can edit or delete an event.
  `
  ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;          -- ms; NULL: never
  ALTER TABLE api_keys ADD COLUMN rate_limit INTEGER;          -- requests per minute; NULL: the server's --rate-limit
  ALTER TABLE api_keys ADD COLUMN labels TEXT;                 -- JSON object of string labels
  CREATE TABLE ledger_new (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    delta      INTEGER NOT NULL,
    reason     TEXT NOT NULL CHECK (reason IN ('free_grant', 'purchase', 'charge', 'correction')),
    ref        TEXT,
    note       TEXT,                                  -- the operator's words for a top-up or a correction
    created_at INTEGER NOT NULL
  );
  INSERT INTO ledger_new (id, account_id, delta, reason, ref, created_at)
    SELECT id, account_id, delta, reason, ref, created_at FROM ledger;
  DROP TABLE ledger;
  ALTER TABLE ledger_new RENAME TO ledger;
  CREATE INDEX ledger_account ON ledger(account_id, created_at);
  CREATE UNIQUE INDEX ledger_one_charge_per_run ON ledger(ref) WHERE reason = 'charge';
  CREATE TABLE audit_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,                      -- ms, the store's clock
    actor      TEXT NOT NULL,                         -- admin | cli:<user> | key:<id> | anonymous
    action     TEXT NOT NULL,                         -- key.create, credits.add, ...
    target     TEXT,                                  -- key_..., acct_...
    request_id TEXT,
    outcome    TEXT NOT NULL,                         -- ok | refused | failed
    detail     TEXT                                   -- JSON: what changed (never a secret)
  );
  CREATE INDEX audit_events_at ON audit_events(at);
  CREATE INDEX audit_events_action ON audit_events(action, at);
  CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
  CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
  `,
];

/** Runs the migrations not yet applied; a no-op on an up-to-date database. Returns the version. */
export async function migrate(db: SqliteDb): Promise<number> {
  for (;;) {
    const applied = await db.transaction(async (tx) => {
      const row = await tx.get<{ user_version: number }>('PRAGMA user_version');
      const version = row?.user_version ?? 0;
      if (version > MIGRATIONS.length) {
        throw new Error(`The database is at schema version ${version}, newer than this cutout (${MIGRATIONS.length}); upgrade cutout`);
      }
      if (version === MIGRATIONS.length) return null;
      // Statements of one migration run one by one inside the transaction so a failure rolls all back.
      for (const statement of splitStatements(MIGRATIONS[version])) await tx.run(statement);
      await tx.run(`PRAGMA user_version = ${version + 1}`);
      return version + 1;
    });
    if (applied === null) return MIGRATIONS.length;
  }
}

