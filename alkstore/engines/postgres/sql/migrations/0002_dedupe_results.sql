-- alkstore on PostgreSQL, schema version 2: deduplication keys and kept results.

-- A job's dedupe key (NULL: none). alk_jobs holds only live rows (pending or
-- processing), so a unique index over it is exactly "one live job per key and
-- queue": INSERT ... ON CONFLICT DO NOTHING makes the database the judge.
-- Adding a NULL column with no default is a catalog change only.
ALTER TABLE {schema}.alk_jobs ADD COLUMN dedupe_key text;
ALTER TABLE {schema}.alk_dead ADD COLUMN dedupe_key text;
CREATE UNIQUE INDEX alk_jobs_dedupe ON {schema}.alk_jobs (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL;

-- Windowed keys: a key enqueued with dedupe_window_s stays taken until
-- expires_at whatever became of its job (acked, dead); the sweep purges them.
CREATE TABLE {schema}.alk_dedupe (
    queue      text        NOT NULL,
    dedupe_key text        NOT NULL,
    job_id     bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (queue, dedupe_key)
);
CREATE INDEX alk_dedupe_expiry ON {schema}.alk_dedupe (queue, expires_at);

-- Kept results: the JSON return value of a successful run, written by the
-- fenced ack in the same statement, purged by the sweep after expires_at.
CREATE TABLE {schema}.alk_results (
    id          bigint      PRIMARY KEY,
    queue       text        NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('success')),
    value       text        NOT NULL,
    attempts    integer     NOT NULL,
    finished_at timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX alk_results_expiry ON {schema}.alk_results (queue, expires_at);
CREATE INDEX alk_results_finished ON {schema}.alk_results (queue, finished_at);

-- Periodic schedules: the latest tick handled per schedule (POSIX seconds) and
-- the job it enqueued. Only ever moves forward (mark_schedule); the tick's own
-- windowed dedupe key is what makes each tick one job across workers.
CREATE TABLE {schema}.alk_schedules (
    name       text             PRIMARY KEY,
    last_tick  double precision NOT NULL,
    last_job   bigint,
    updated_at timestamptz      NOT NULL
);
