-- alkstore on sqlite: the CURRENT schema, built at once (a fresh store at the latest version).
-- Every migration in sql/migrations/, applied in order, must build exactly this
-- catalog (tests/contract/test_migrations.py compares them): a migration that
-- changes the schema changes this file too.
-- Times are REAL POSIX seconds from the writer's clock; durations are REAL seconds.

-- Freed pages go back to the file system in bounded steps (the sweep's
-- reclaim, migration 0013); the mode must be set before the first table.
PRAGMA auto_vacuum = INCREMENTAL;

-- Live jobs. AUTOINCREMENT so an id is never reused, even after the highest
-- row was acked or moved to the dead table (plain rowids would hand it out again).
CREATE TABLE alk_jobs (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    queue                TEXT    NOT NULL,
    payload              BLOB    NOT NULL,
    state                TEXT    NOT NULL DEFAULT 'pending'
                                 CHECK (state IN ('pending', 'processing', 'blocked')),
    priority             INTEGER NOT NULL,
    run_at               REAL    NOT NULL,
    created_at           REAL    NOT NULL,
    attempts             INTEGER NOT NULL DEFAULT 0,
    max_attempts         INTEGER NOT NULL,
    visibility_timeout_s REAL    NOT NULL,
    retry_base_s         REAL    NOT NULL,
    expires_at           REAL,
    worker_id            TEXT,
    claim_expires_at     REAL,
    last_error           TEXT,
    dedupe_key           TEXT,
    -- the partition of a per-partition concurrency limit (NULL: none); schema v4
    partition_key        TEXT,
    -- one pending job per debounce key (NULL: none); schema v7
    debounce_key         TEXT,
    -- the last priority-aging promotion (NULL: none); schema v7
    promoted_at          REAL,
    -- a blocked job's count of parents not yet finished (NULL: never blocked); schema v8
    waiting              INTEGER,
    -- bit 1: has dependents, bit 2: has parents, bit 4: being cancelled; schema v8
    deps                 INTEGER NOT NULL DEFAULT 0
);

-- The claim's pending arm walks this index in claim order and stops at LIMIT
-- (no sort of the backlog): priority DESC, run_at, id within one queue.
CREATE INDEX alk_jobs_pending_claim ON alk_jobs (queue, priority DESC, run_at, id)
    WHERE state = 'pending';

-- Earliest delayed job per queue (the wake loop's "next due" timer).
CREATE INDEX alk_jobs_pending_due ON alk_jobs (queue, run_at) WHERE state = 'pending';

-- Lapsed claims (reclaim arm, pre-claim exhausted sweep, next lapse).
CREATE INDEX alk_jobs_processing ON alk_jobs (queue, claim_expires_at) WHERE state = 'processing';

-- sweep_expired; rows without an expiry are not in the index at all.
CREATE INDEX alk_jobs_expiry ON alk_jobs (queue, expires_at) WHERE expires_at IS NOT NULL;

-- Dead letters keep the job's id, payload, attempts and stamps.
CREATE TABLE alk_dead (
    id                   INTEGER PRIMARY KEY,
    queue                TEXT    NOT NULL,
    payload              BLOB    NOT NULL,
    priority             INTEGER NOT NULL,
    run_at               REAL    NOT NULL,
    created_at           REAL    NOT NULL,
    attempts             INTEGER NOT NULL,
    max_attempts         INTEGER NOT NULL,
    visibility_timeout_s REAL    NOT NULL,
    retry_base_s         REAL    NOT NULL,
    expires_at           REAL,
    worker_id            TEXT,
    claim_expires_at     REAL,
    last_error           TEXT,
    died_at              REAL    NOT NULL,
    dedupe_key           TEXT,
    -- the partition key the job had when it died (NULL: none); schema v5
    partition_key        TEXT
);

-- Retention purge per queue.
CREATE INDEX alk_dead_died ON alk_dead (queue, died_at);

-- Cross-process notifications (LISTEN/NOTIFY emulation, see listener.py).
-- AUTOINCREMENT: ids only grow, so a listener's "id > cursor" never misses a
-- note after old rows are trimmed.
CREATE TABLE alk_notes (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    payload TEXT NOT NULL
);

-- Schema version 2: deduplication keys, kept results, schedules.

-- A job's dedupe key (NULL: none). alk_jobs holds only live rows (pending or
-- processing), so a unique index over it is exactly "one live job per key and
-- queue": the database, not a check-then-insert, rejects the duplicate.
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

-- Schema version 3: live workers and outcome history (migration 0003_workers).
-- One row per running worker, refreshed with its heartbeat; deleted when it
-- stops, or by another worker's cleanup once it has not been seen for long.
CREATE TABLE alk_workers (
    id          TEXT    PRIMARY KEY,
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    queues      TEXT    NOT NULL,
    concurrency INTEGER NOT NULL,
    running     INTEGER NOT NULL,
    started_at  REAL    NOT NULL,
    last_seen   REAL    NOT NULL
);

-- Jobs finished per queue, minute and outcome (success, retry, dead, lost,
-- interrupted), added to by the workers; the dashboard's throughput and
-- failure-rate chart reads the last hour. `minute` is POSIX seconds of the
-- minute's start. Old minutes are purged by the workers.
CREATE TABLE alk_outcomes (
    queue   TEXT    NOT NULL,
    minute  INTEGER NOT NULL,
    outcome TEXT    NOT NULL,
    count   INTEGER NOT NULL,
    PRIMARY KEY (queue, minute, outcome)
) WITHOUT ROWID;

-- Schema version 4: flow control (pause, limits, partition keys; migration 0004_flow_control).

-- Running jobs per partition (the per-partition limit counts them at each claim).
CREATE INDEX alk_jobs_partition ON alk_jobs (queue, partition_key, claim_expires_at)
    WHERE state = 'processing' AND partition_key IS NOT NULL;

-- One row per queue that was ever paused or limited; a queue without a row is
-- unpaused and unlimited. tat is the rate limiter's state (core/flow.py).
CREATE TABLE alk_queues (
    queue                 TEXT    PRIMARY KEY,
    paused                INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    concurrency           INTEGER CHECK (concurrency >= 1),
    partition_concurrency INTEGER CHECK (partition_concurrency >= 1),
    rate_count            INTEGER CHECK (rate_count >= 1),
    rate_period_s         REAL    CHECK (rate_period_s > 0),
    burst                 INTEGER CHECK (burst >= 1),
    tat                   REAL,
    -- schema v7: fair claiming across partition keys, and the aging interval
    fair                  INTEGER NOT NULL DEFAULT 0 CHECK (fair IN (0, 1)),
    aging_s               REAL    CHECK (aging_s > 0)
) WITHOUT ROWID;

-- Schema version 6: ack receipts (migration 0006_ack_receipts).
-- One row per acking worker, overwritten by each of its ack batches in the
-- batch's own transaction: which batch (token, kept by its retries) and the
-- JSON array of its job ids no attempt deleted (docs/contract.md, "Ack receipts").
CREATE TABLE alk_ack_receipts (
    owner   TEXT PRIMARY KEY,
    token   TEXT NOT NULL,
    refused TEXT NOT NULL,
    at      REAL NOT NULL
) WITHOUT ROWID;

-- Schema version 7: fair queues, priority aging, debounce (migration 0007_fair_queues).

-- One PENDING job per debounce key (a claimed job leaves the index).
CREATE UNIQUE INDEX alk_jobs_debounce ON alk_jobs (queue, debounce_key)
    WHERE state = 'pending' AND debounce_key IS NOT NULL;

-- A fair claim's probe of one key: its best due pending jobs in claim order.
CREATE INDEX alk_jobs_fair ON alk_jobs (queue, partition_key, priority DESC, run_at, id)
    WHERE state = 'pending' AND partition_key IS NOT NULL;

-- The key cursors of fair queues (see the PostgreSQL schema).
CREATE TABLE alk_fair (
    queue         TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    vtime         REAL NOT NULL,
    PRIMARY KEY (queue, partition_key)
) WITHOUT ROWID;
CREATE INDEX alk_fair_order ON alk_fair (queue, vtime, partition_key);

-- Per-key weights of fair queues (a key without a row weighs 1).
CREATE TABLE alk_fair_weights (
    queue         TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    weight        REAL NOT NULL CHECK (weight > 0),
    PRIMARY KEY (queue, partition_key)
) WITHOUT ROWID;

-- Schema version 9: a job's life (migration 0009_job_life): attempt history, progress,
-- durable steps, signals. See the migration for the comments.
CREATE TABLE alk_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      INTEGER NOT NULL,
    queue       TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    worker_id   TEXT,
    host        TEXT,
    claimed_at  REAL    NOT NULL,
    finished_at REAL    NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN
        ('success', 'retry', 'dead', 'lost', 'interrupted', 'cancelled', 'snoozed')),
    error       TEXT,
    trimmed     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX alk_attempts_job ON alk_attempts (job_id, id);
CREATE INDEX alk_attempts_queue ON alk_attempts (queue, job_id);
CREATE TABLE alk_progress (
    job_id     INTEGER PRIMARY KEY,
    queue      TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    value      REAL    NOT NULL,
    message    TEXT,
    updated_at REAL    NOT NULL
);
CREATE INDEX alk_progress_queue ON alk_progress (queue, job_id);
CREATE TABLE alk_steps (
    job_id  INTEGER NOT NULL,
    name    TEXT    NOT NULL,
    queue   TEXT    NOT NULL,
    value   TEXT    NOT NULL,
    attempt INTEGER NOT NULL,
    done_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;
CREATE INDEX alk_steps_queue ON alk_steps (queue, job_id);
CREATE TABLE alk_signals (
    job_id  INTEGER NOT NULL,
    name    TEXT    NOT NULL,
    queue   TEXT    NOT NULL,
    payload TEXT    NOT NULL,
    sent_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;
CREATE INDEX alk_signals_queue ON alk_signals (queue, job_id);
-- Schema version 8: dependencies between jobs (migration 0008_dependencies).
-- State 'blocked', `waiting` and `deps` are in alk_jobs above.

-- The edges (see the PostgreSQL schema): `policy` 'success' or 'complete';
-- `killed`: this parent's death dead-lettered the child.
CREATE TABLE alk_deps (
    parent INTEGER NOT NULL,
    child  INTEGER NOT NULL,
    policy TEXT    NOT NULL CHECK (policy IN ('success', 'complete')),
    killed INTEGER NOT NULL DEFAULT 0 CHECK (killed IN (0, 1)),
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;
CREATE INDEX alk_deps_child ON alk_deps (child);

-- The queues where the trigger below made a child pending: the write drains
-- it before its COMMIT into wake notes (best effort: a failed wake never fails
-- the ack, which a note written by the trigger itself would).
CREATE TABLE alk_deps_woken (queue TEXT NOT NULL);

-- What a parent's end does to its children, in the write that ended it
-- (whichever statement deleted the row). Died: a dead row of its id exists
-- (every dead-letter move copies before it deletes). Cancelled: deps bit 4
-- (the cancel sets it), or a row that was not processing (only a processing
-- row is ever acked). Otherwise it succeeded. The single writer makes the
-- decrement race-free; the connections run with recursive_triggers on, so
-- the deletes of dead-lettered children fire this trigger again (the cascade).
-- (Every table a trigger names must exist when any delete of alk_jobs is
-- prepared, so it names only its own tables.)
CREATE TRIGGER alk_jobs_gone AFTER DELETE ON alk_jobs WHEN OLD.deps <> 0
BEGIN
    INSERT INTO alk_results (id, queue, outcome, value, attempts, finished_at, expires_at)
    SELECT OLD.id, OLD.queue, 'success', 'null', OLD.attempts,
           (julianday('now') - 2440587.5) * 86400.0, (julianday('now') - 2440587.5) * 86400.0
    WHERE OLD.deps & 1 AND OLD.state = 'processing' AND NOT OLD.deps & 4
      AND NOT EXISTS (SELECT 1 FROM alk_dead WHERE id = OLD.id)
    ON CONFLICT (id) DO NOTHING;
    UPDATE alk_jobs
    SET waiting = waiting - 1, state = CASE WHEN waiting = 1 THEN 'pending' ELSE 'blocked' END
    WHERE OLD.deps & 1 AND state = 'blocked' AND id IN (
        SELECT child FROM alk_deps WHERE parent = OLD.id
          AND (policy = 'complete'
               OR (OLD.state = 'processing' AND NOT OLD.deps & 4
                   AND NOT EXISTS (SELECT 1 FROM alk_dead WHERE id = OLD.id))));
    INSERT INTO alk_deps_woken (queue)
    SELECT DISTINCT queue FROM alk_jobs
    WHERE OLD.deps & 1 AND state = 'pending'
      AND id IN (SELECT child FROM alk_deps WHERE parent = OLD.id);
    UPDATE alk_deps SET killed = 1
    WHERE OLD.deps & 1 AND parent = OLD.id AND policy = 'success'
      AND (OLD.state <> 'processing' OR OLD.deps & 4
           OR EXISTS (SELECT 1 FROM alk_dead WHERE id = OLD.id))
      AND child IN (SELECT id FROM alk_jobs WHERE state = 'blocked');
    INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
                          visibility_timeout_s, retry_base_s, expires_at, worker_id,
                          claim_expires_at, last_error, died_at, dedupe_key, partition_key)
    SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           COALESCE('dependency ' || OLD.id || ' died: '
                    || (SELECT COALESCE(last_error, 'dead') FROM alk_dead WHERE id = OLD.id),
                    'dependency ' || OLD.id || ' was cancelled'),
           (julianday('now') - 2440587.5) * 86400.0, dedupe_key, partition_key
    FROM alk_jobs
    WHERE OLD.deps & 1 AND state = 'blocked'
      AND id IN (SELECT child FROM alk_deps WHERE parent = OLD.id AND killed);
    DELETE FROM alk_jobs
    WHERE OLD.deps & 1 AND state = 'blocked'
      AND id IN (SELECT child FROM alk_deps WHERE parent = OLD.id AND killed);
    DELETE FROM alk_deps
    WHERE OLD.deps & 2 AND child = OLD.id
      AND NOT EXISTS (SELECT 1 FROM alk_dead WHERE id = OLD.id);
END;
-- Schema version 10: job search and bulk actions (migration 0010_search_bulk).

-- Search and bulk actions on dead jobs by queue, in id order (the keyset of
-- their pages and of an action's batches).
CREATE INDEX alk_dead_queue_id ON alk_dead (queue, id);

-- One row per bulk action: the audit and the resumable cursor (see the
-- PostgreSQL schema). Times are REAL POSIX seconds.
CREATE TABLE alk_bulk_actions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    action      TEXT    NOT NULL,
    filter      TEXT    NOT NULL,
    priority    INTEGER,
    to_queue    TEXT,
    actor       TEXT    NOT NULL,
    matched     INTEGER NOT NULL,
    done        INTEGER NOT NULL DEFAULT 0,
    phase       TEXT    NOT NULL CHECK (phase IN ('live', 'dead', 'done')),
    after_id    INTEGER NOT NULL DEFAULT 0,
    created_at  REAL    NOT NULL,
    updated_at  REAL    NOT NULL,
    finished_at REAL
);
-- Schema version 11: the outcome history kept for days (migration 0011_outcome_history).

-- The per-minute outcome counts (alk_outcomes, version 3) are now kept for a
-- week by default (the worker's history_retention_s), and the workers purge
-- old minutes at each write: by the primary key (queue first) that DELETE read
-- the whole table. This index makes the purge, and the dashboard's reads of a
-- time range across queues, a range scan of the minutes concerned.
CREATE INDEX alk_outcomes_minute ON alk_outcomes (minute);
