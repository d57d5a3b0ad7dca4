-- alkstore on SQLite, schema version 8: dependencies between jobs (docs/contract.md,
-- "Dependencies"). (Versions 9-11 are other changes'; migrations apply in number order.)

-- A job enqueued with EnqueueOpts(after=...) waits in state 'blocked' until its
-- counter `waiting` of unfinished parents reaches 0; `deps` keeps this off the
-- plain path (bit 1: has dependents, bit 2: has parents, bit 4: being
-- cancelled; 0 fires no trigger). SQLite cannot widen a CHECK in place, so
-- alk_jobs is rebuilt (every row copied, its AUTOINCREMENT counter kept, its
-- indexes made again).
CREATE TABLE alk_jobs_v8 (
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
    partition_key        TEXT,
    debounce_key         TEXT,
    promoted_at          REAL,
    waiting              INTEGER,
    deps                 INTEGER NOT NULL DEFAULT 0
);
INSERT INTO alk_jobs_v8 (id, queue, payload, state, priority, run_at, created_at, attempts,
                         max_attempts, visibility_timeout_s, retry_base_s, expires_at,
                         worker_id, claim_expires_at, last_error, dedupe_key, partition_key,
                         debounce_key, promoted_at)
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, dedupe_key, partition_key, debounce_key, promoted_at
FROM alk_jobs;
DELETE FROM sqlite_sequence WHERE name = 'alk_jobs_v8';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'alk_jobs_v8', seq FROM sqlite_sequence WHERE name = 'alk_jobs';
DROP TABLE alk_jobs;
ALTER TABLE alk_jobs_v8 RENAME TO alk_jobs;
CREATE INDEX alk_jobs_pending_claim ON alk_jobs (queue, priority DESC, run_at, id)
    WHERE state = 'pending';
CREATE INDEX alk_jobs_pending_due ON alk_jobs (queue, run_at) WHERE state = 'pending';
CREATE INDEX alk_jobs_processing ON alk_jobs (queue, claim_expires_at) WHERE state = 'processing';
CREATE INDEX alk_jobs_expiry ON alk_jobs (queue, expires_at) WHERE expires_at IS NOT NULL;
CREATE UNIQUE INDEX alk_jobs_dedupe ON alk_jobs (queue, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX alk_jobs_partition ON alk_jobs (queue, partition_key, claim_expires_at)
    WHERE state = 'processing' AND partition_key IS NOT NULL;
CREATE UNIQUE INDEX alk_jobs_debounce ON alk_jobs (queue, debounce_key)
    WHERE state = 'pending' AND debounce_key IS NOT NULL;
CREATE INDEX alk_jobs_fair ON alk_jobs (queue, partition_key, priority DESC, run_at, id)
    WHERE state = 'pending' AND partition_key IS NOT NULL;

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
