/**
 * The PostgreSQL schema, as ordered migrations recorded in `schema_migrations`. It holds the same
 * tables and columns as the SQLite schema after its migrations (src/store/migrations.ts), so the
 * store's portable SQL runs on both, plus what only a fleet needs: the result bytes and job
 * inputs as BYTEA (no server's disk holds anything a job or a result needs), BIGINT times, and a
 * `rowid` sequence where SQLite orders by its implicit rowid.
 *
 * Several servers may start at once: the whole run holds a session advisory lock, so exactly one
 * of them migrates and the others then find the schema up to date. Append; never edit a migration
 * that has shipped.
 */
import type { PostgresDb } from './postgres.js';
import { splitStatements } from './split.js';

/** pg_advisory_lock key of the migrations: "cutout" in ASCII. */
const MIGRATION_LOCK = 0x637574_6f7574;

export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE accounts (
    id               TEXT PRIMARY KEY,
    plan             TEXT NOT NULL DEFAULT 'free',
    test             INTEGER NOT NULL DEFAULT 0,
    marketplace_user TEXT UNIQUE,
    created_at       BIGINT NOT NULL
  );

  CREATE TABLE api_keys (
    id         TEXT PRIMARY KEY,
    rowid      BIGSERIAL,                             -- creation order, as SQLite's rowid
    account_id TEXT NOT NULL REFERENCES accounts(id),
    name       TEXT,
    kind       TEXT NOT NULL CHECK (kind IN ('live', 'test')),
    hash       TEXT NOT NULL UNIQUE,
    hint       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
  );
  CREATE INDEX api_keys_account ON api_keys(account_id);

  CREATE TABLE ledger (
    id         BIGSERIAL PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    delta      BIGINT NOT NULL,
    reason     TEXT NOT NULL CHECK (reason IN ('free_grant', 'purchase', 'charge')),
    ref        TEXT,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX ledger_account ON ledger(account_id, created_at);
  -- A run (a job) is charged at most once, whatever sequence of crashes happens above.
  CREATE UNIQUE INDEX ledger_one_charge_per_run ON ledger(ref) WHERE reason = 'charge';

  CREATE TABLE runs (
    id         TEXT PRIMARY KEY,
    account_id TEXT REFERENCES accounts(id),
    key_id     TEXT REFERENCES api_keys(id),
    channel    TEXT NOT NULL CHECK (channel IN ('cli', 'api', 'job')),
    input      TEXT,
    size       TEXT NOT NULL CHECK (size IN ('preview', 'full')),
    credits    INTEGER NOT NULL CHECK (credits IN (0, 1)),
    ms         BIGINT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX runs_account_time ON runs(account_id, created_at);

  -- Stored results with their bytes: any server serves any result.
  CREATE TABLE results (
    job_id       TEXT PRIMARY KEY,
    path         TEXT,                                -- unused here (SQLite keeps files)
    data         BYTEA NOT NULL,
    content_type TEXT NOT NULL,
    width        INTEGER NOT NULL,
    height       INTEGER NOT NULL,
    created_at   BIGINT NOT NULL
  );
  CREATE INDEX results_created ON results(created_at);

  CREATE TABLE idempotency_keys (
    account_id  TEXT NOT NULL REFERENCES accounts(id),
    endpoint    TEXT NOT NULL,
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'done')),
    response    TEXT,
    created_at  BIGINT NOT NULL,
    owner_pid   INTEGER,
    owner       TEXT,                                 -- server identity holding a pending claim
    PRIMARY KEY (account_id, endpoint, key)
  );
  CREATE INDEX idempotency_created ON idempotency_keys(created_at);

  CREATE TABLE jobs (
    id                TEXT PRIMARY KEY,
    rowid             BIGSERIAL,                      -- submission order inside one created_at (batches)
    account_id        TEXT NOT NULL REFERENCES accounts(id),
    key_id            TEXT REFERENCES api_keys(id),
    status            TEXT NOT NULL CHECK (status IN ('queued', 'processing', 'done', 'failed')),
    params            TEXT NOT NULL,
    input_path        TEXT,                           -- unused here: the bytes are in job_inputs
    callback_url      TEXT,
    error             TEXT,
    credits_charged   INTEGER,
    credits_remaining BIGINT,
    lease_until       BIGINT,
    attempts          INTEGER NOT NULL DEFAULT 0,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    finished_at       BIGINT,
    source_kind       TEXT,
    source_url        TEXT,
    input_desc        TEXT,
    billable          INTEGER NOT NULL DEFAULT 1,
    batch_id          TEXT,
    lease_owner       TEXT
  );
  CREATE INDEX jobs_status ON jobs(status, created_at);
  CREATE INDEX jobs_account ON jobs(account_id, created_at);
  CREATE INDEX jobs_lease ON jobs(status, lease_until);

  -- The uploaded input of a queued job, until the job is done or failed.
  CREATE TABLE job_inputs (
    job_id TEXT PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
    data   BYTEA NOT NULL
  );

  CREATE TABLE callback_deliveries (
    id              BIGSERIAL PRIMARY KEY,
    job_id          TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    body            TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    delivered_at    BIGINT,
    last_error      TEXT,
    created_at      BIGINT NOT NULL,
    gave_up_at      BIGINT,
    lease_owner     TEXT,
    lease_until     BIGINT
  );
  CREATE INDEX callback_deliveries_due ON callback_deliveries(delivered_at, next_attempt_at);

  CREATE TABLE rate_windows (
    rate_key   TEXT PRIMARY KEY,
    hits       TEXT NOT NULL,
    updated_at BIGINT NOT NULL
  );

  CREATE TABLE servers (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    lease_ms     BIGINT NOT NULL
  );

  -- Secrets every server must share (the callback signing key), generated once by the first server.
  CREATE TABLE secrets (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at BIGINT NOT NULL
  );
  `,
  // 2: claims that ended in an inference outage (an upstream down), which must not count towards
  // the attempts after which an interrupted job is failed (SQLite's migration 5).
  `
  ALTER TABLE jobs ADD COLUMN outages INTEGER NOT NULL DEFAULT 0;
  `,
  // 3: results whose bytes live in an object store (--results s3://...): the row holds the
  // object's key in \`path\` and no bytes.
  `
  ALTER TABLE results ALTER COLUMN data DROP NOT NULL;
  `,
  // 4: what a done job's result says of itself, as one JSON object (SQLite's migration 6).
  `
  ALTER TABLE jobs ADD COLUMN result_fields TEXT;
  `,
  // 5: room in runs: any whole number of credits, any channel (SQLite's migration 7).
  `
  ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_channel_check;
  ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_credits_check;
  ALTER TABLE runs ADD CONSTRAINT runs_credits_check CHECK (credits >= 0);
  `,
  // 6: the rate limit in one statement (rate-limit.ts; SQLite's migration 8): the log becomes a
  // BIGINT[], which the upsert appends to and slices in place, and \`refused\` says whether the
  // request was admitted. Windows open now carry over: their JSON arrays of integers ("[1,2]")
  // read as array literals once the brackets are braces (ALTER ... USING allows no subquery).
  `
  ALTER TABLE rate_windows ALTER COLUMN hits TYPE BIGINT[] USING translate(hits, '[]', '{}')::BIGINT[];
  ALTER TABLE rate_windows ADD COLUMN refused INTEGER NOT NULL DEFAULT 0;
  `,
  // 7: what a stored result says of itself, as one JSON object (SQLite's migration 9).
  `
  ALTER TABLE results ADD COLUMN result_fields TEXT;
  `,
  // 8: the traceparent of a job's request and of its run on the callback (SQLite's migration 10).
  `
  ALTER TABLE jobs ADD COLUMN traceparent TEXT;
  ALTER TABLE callback_deliveries ADD COLUMN traceparent TEXT;
  `,
  // 9: keys' expiry, rate limit and labels, credit corrections with a reason, and the audit
  // trail (SQLite's migration 11). A trigger refuses UPDATE, DELETE and TRUNCATE of an event.
  `
  ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
  ALTER TABLE api_keys ADD COLUMN rate_limit INTEGER;
  ALTER TABLE api_keys ADD COLUMN labels TEXT;
  ALTER TABLE ledger DROP CONSTRAINT IF EXISTS ledger_reason_check;
  ALTER TABLE ledger ADD CONSTRAINT ledger_reason_check CHECK (reason IN ('free_grant', 'purchase', 'charge', 'correction'));
  ALTER TABLE ledger ADD COLUMN note TEXT;
  CREATE TABLE audit_events (
    id         BIGSERIAL PRIMARY KEY,
    at         BIGINT NOT NULL,
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL,
    target     TEXT,
    request_id TEXT,
    outcome    TEXT NOT NULL,
    detail     TEXT
  );
  CREATE INDEX audit_events_at ON audit_events(at);
  CREATE INDEX audit_events_action ON audit_events(action, at);
  CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit events are append-only'; END $$;
  CREATE TRIGGER audit_events_no_change BEFORE UPDATE OR DELETE ON audit_events FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
  CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
  `,
];

/** Brings the schema up to date under the advisory lock. Returns the version. */
export async function migratePostgres(db: PostgresDb): Promise<number> {
  return db.withAdvisoryLock(MIGRATION_LOCK, async (q) => {
    await q.run('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)');
    const row = await q.get<{ version: number | null }>('SELECT MAX(version) AS version FROM schema_migrations');
    let version = row?.version ?? 0;
    if (version > PG_MIGRATIONS.length) {
      throw new Error(`The database is at schema version ${version}, newer than this cutout (${PG_MIGRATIONS.length}); upgrade cutout`);
    }
    while (version < PG_MIGRATIONS.length) {
      await q.run('BEGIN');
      try {
        for (const statement of splitStatements(PG_MIGRATIONS[version])) await q.run(statement);
        await q.run('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)', [version + 1, Date.now()]);
        await q.run('COMMIT');
      } catch (err) {
        await q.run('ROLLBACK').catch(() => undefined);
        throw err;
      }
      version++;
    }
    return version;
  });
}
