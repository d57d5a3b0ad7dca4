-- alkstore on PostgreSQL, schema version 9: a job's life (attempt history,
-- progress, durable steps, signals). (Version 8 is another change's; migrations
-- apply in number order.) None of these tables is on the claim or ack path: the
-- worker writes them beside its outcomes, and the sweep drops the rows of jobs
-- that are gone (not live, not dead, no kept result).

-- One row per finished attempt (a plain success is not kept: its job is gone).
-- outcome is what the database did: a refused outcome is 'lost'.
CREATE TABLE {schema}.alk_attempts (
    id          bigserial   PRIMARY KEY,
    job_id      bigint      NOT NULL,
    queue       text        NOT NULL,
    attempt     integer     NOT NULL,
    worker_id   text,
    host        text,
    claimed_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN
        ('success', 'retry', 'dead', 'lost', 'interrupted', 'cancelled', 'snoozed')),
    error       text,
    -- true on the oldest row kept once older ones were trimmed (below it: not lost)
    trimmed     boolean     NOT NULL DEFAULT false
);
CREATE INDEX alk_attempts_job ON {schema}.alk_attempts (job_id, id);
CREATE INDEX alk_attempts_queue ON {schema}.alk_attempts (queue, job_id);

-- The latest progress of a job (one row, overwritten; fenced on its attempt).
CREATE TABLE {schema}.alk_progress (
    job_id     bigint           PRIMARY KEY,
    queue      text             NOT NULL,
    attempt    integer          NOT NULL,
    value      double precision NOT NULL,
    message    text,
    updated_at timestamptz      NOT NULL
);
CREATE INDEX alk_progress_queue ON {schema}.alk_progress (queue, job_id);

-- Durable steps: the JSON result of each completed step (by its key), written
-- fenced by the attempt that ran it, read back by every later attempt.
CREATE TABLE {schema}.alk_steps (
    job_id  bigint      NOT NULL,
    name    text        NOT NULL,
    queue   text        NOT NULL,
    value   text        NOT NULL,
    attempt integer     NOT NULL,
    done_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, name)
);
CREATE INDEX alk_steps_queue ON {schema}.alk_steps (queue, job_id);

-- Signals sent to a job (store.signal): the first of each name is kept.
CREATE TABLE {schema}.alk_signals (
    job_id  bigint      NOT NULL,
    name    text        NOT NULL,
    queue   text        NOT NULL,
    payload text        NOT NULL,
    sent_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, name)
);
CREATE INDEX alk_signals_queue ON {schema}.alk_signals (queue, job_id);
