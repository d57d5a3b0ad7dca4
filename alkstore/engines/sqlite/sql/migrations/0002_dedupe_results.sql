-- alkstore on SQLite, schema version 2: deduplication keys and kept results.

-- A job's dedupe key (NULL: none). alk_jobs holds only live rows (pending or
-- processing), so a unique index over it is exactly "one live job per key and
-- queue": the database, not a check-then-insert, rejects the duplicate.
ALTER TABLE alk_jobs ADD COLUMN dedupe_key TEXT;
ALTER TABLE alk_dead ADD COLUMN dedupe_key TEXT;
CREATE UNIQUE INDEX alk_jobs_dedupe ON alk_jobs (queue, dedupe_key) WHERE dedupe_key IS NOT NULL;

-- Windowed keys: a key enqueued with dedupe_window_s stays taken until
-- expires_at whatever became of its job (acked, dead); the sweep purges them.
CREATE TABLE alk_dedupe (
    queue      TEXT    NOT NULL,
    dedupe_key TEXT    NOT NULL,
    job_id     INTEGER NOT NULL,
    expires_at REAL    NOT NULL,
    PRIMARY KEY (queue, dedupe_key)
) WITHOUT ROWID;
CREATE INDEX alk_dedupe_expiry ON alk_dedupe (queue, expires_at);

-- Kept results: the JSON return value of a successful run, written by the
-- fenced ack in the same transaction, purged by the sweep after expires_at.
CREATE TABLE alk_results (
    id          INTEGER PRIMARY KEY,
    queue       TEXT    NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('success')),
    value       TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    finished_at REAL    NOT NULL,
    expires_at  REAL    NOT NULL
);
CREATE INDEX alk_results_expiry ON alk_results (queue, expires_at);
CREATE INDEX alk_results_finished ON alk_results (queue, finished_at);

-- Periodic schedules: the latest tick handled per schedule (POSIX seconds) and
-- the job it enqueued. Only ever moves forward (mark_schedule); the tick's own
-- windowed dedupe key is what makes each tick one job across workers.
CREATE TABLE alk_schedules (
    name       TEXT    PRIMARY KEY,
    last_tick  REAL    NOT NULL,
    last_job   INTEGER,
    updated_at REAL    NOT NULL
);
