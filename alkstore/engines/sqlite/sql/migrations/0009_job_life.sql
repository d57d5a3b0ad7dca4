-- alkstore on SQLite, schema version 9: a job's life (attempt history, progress,
-- durable steps, signals). (Version 8 is another change's; migrations apply in
-- number order.) None of these tables is on the claim or ack path: the worker
-- writes them beside its outcomes, and the sweep drops the rows of jobs that are
-- gone (not live, not dead, no kept result).

-- One row per finished attempt (a plain success is not kept: its job is gone).
-- outcome is what the database did: a refused outcome is 'lost'.
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
    -- 1 on the oldest row kept once older ones were trimmed (below it: not lost)
    trimmed     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX alk_attempts_job ON alk_attempts (job_id, id);
CREATE INDEX alk_attempts_queue ON alk_attempts (queue, job_id);

-- The latest progress of a job (one row, overwritten; fenced on its attempt).
CREATE TABLE alk_progress (
    job_id     INTEGER PRIMARY KEY,
    queue      TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    value      REAL    NOT NULL,
    message    TEXT,
    updated_at REAL    NOT NULL
);
CREATE INDEX alk_progress_queue ON alk_progress (queue, job_id);

-- Durable steps: the JSON result of each completed step (by its key), written
-- fenced by the attempt that ran it, read back by every later attempt.
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

-- Signals sent to a job (store.signal): the first of each name is kept.
CREATE TABLE alk_signals (
    job_id  INTEGER NOT NULL,
    name    TEXT    NOT NULL,
    queue   TEXT    NOT NULL,
    payload TEXT    NOT NULL,
    sent_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
) WITHOUT ROWID;
CREATE INDEX alk_signals_queue ON alk_signals (queue, job_id);
