-- A job's life (schema 9): attempt history, progress, durable steps, signals.
-- Loaded beside queries.sql (migrator.QUERIES). "Fenced" below is the handle
-- operations' fence: the row is processing, its claim not lapsed and its
-- attempts still the writer's; FOR SHARE holds it against a reclaim until the
-- write commits (a concurrent reclaim re-checks and the write finds no row).

-- name: life_add_attempts
-- Finished attempts, as the worker's completer recorded them (a JSON array).
INSERT INTO {schema}.alk_attempts (job_id, queue, attempt, worker_id, host, claimed_at,
                                   finished_at, outcome, error)
SELECT r.job_id, r.queue, r.attempt, r.worker_id, r.host, to_timestamp(r.claimed_at),
       to_timestamp(r.finished_at), r.outcome, r.error
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(job_id bigint, queue text, attempt integer,
     worker_id text, host text, claimed_at float8, finished_at float8, outcome text, error text);

-- name: life_trim_attempts
-- Keep each listed job's newest :keep attempts; the oldest row left of a job that
-- lost rows says so (trimmed: the numbers below it are not lost, only not kept).
WITH ranked AS (
    SELECT id, job_id, row_number() OVER (PARTITION BY job_id ORDER BY id DESC) AS n
    FROM {schema}.alk_attempts WHERE job_id = ANY(%(ids)s::bigint[])
), cut AS (
    DELETE FROM {schema}.alk_attempts AS a USING ranked
    WHERE a.id = ranked.id AND ranked.n > %(keep)s
    RETURNING a.job_id
)
UPDATE {schema}.alk_attempts SET trimmed = true
WHERE id IN (SELECT id FROM ranked WHERE n = %(keep)s AND job_id IN (SELECT job_id FROM cut));

-- name: life_attempts
SELECT attempt, worker_id, host, claimed_at, finished_at, outcome, error, trimmed
FROM {schema}.alk_attempts WHERE job_id = %(id)s AND queue = %(queue)s ORDER BY id;

-- name: life_put_progress
-- Fenced upsert of the job's latest progress; its commit does not wait for the
-- WAL flush (best-effort data: see life_put_step).
WITH quick AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS v)
INSERT INTO {schema}.alk_progress (job_id, queue, attempt, value, message, updated_at)
SELECT j.id, j.queue, j.attempts, %(value)s, %(message)s, {now}
FROM {schema}.alk_jobs AS j, quick
WHERE j.id = %(id)s AND j.queue = %(queue)s AND (j.state || '') = 'processing'
  AND j.attempts = %(attempts)s AND j.claim_expires_at >= {now} AND quick.v = 'off'
FOR SHARE OF j
ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt, value = excluded.value,
    message = excluded.message, updated_at = excluded.updated_at;

-- name: life_progress
SELECT attempt, value, message, updated_at FROM {schema}.alk_progress
WHERE job_id = %(id)s AND queue = %(queue)s;

-- name: life_put_step
-- Fenced insert of a completed step's JSON result (the first one stays). Its
-- transaction commits with synchronous_commit off (set_config local to it; the
-- session keeps its setting): visible at once and kept through any crash of the
-- worker, and ordered before every later commit, whose WAL flush covers it; only
-- a crash of the server can lose the checkpoints no later commit flushed yet
-- (well under a second's), and those steps then run again: the at-least-once of
-- every step. It spares the flush wait, most of a step's round trip.
WITH quick AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true) AS v)
INSERT INTO {schema}.alk_steps (job_id, name, queue, value, attempt, done_at)
SELECT j.id, %(name)s, j.queue, %(value)s, j.attempts, {now}
FROM {schema}.alk_jobs AS j, quick
WHERE j.id = %(id)s AND j.queue = %(queue)s AND (j.state || '') = 'processing'
  AND j.attempts = %(attempts)s AND j.claim_expires_at >= {now} AND quick.v = 'off'
FOR SHARE OF j
ON CONFLICT (job_id, name) DO NOTHING;

-- name: life_steps
SELECT name, value FROM {schema}.alk_steps WHERE job_id = %(id)s AND queue = %(queue)s;

-- name: life_put_signal
-- The signal of a live job (the first of each name stays); its queue, or no row.
WITH job AS (SELECT id, queue FROM {schema}.alk_jobs WHERE id = %(id)s),
ins AS (
    INSERT INTO {schema}.alk_signals (job_id, name, queue, payload, sent_at)
    SELECT id, %(name)s, queue, %(payload)s, {now} FROM job
    ON CONFLICT (job_id, name) DO NOTHING
)
SELECT queue FROM job;

-- name: life_signal
SELECT payload FROM {schema}.alk_signals
WHERE job_id = %(id)s AND queue = %(queue)s AND name = %(name)s;

-- name: life_poke
-- A job parked on signal :name (its wait step is stored) that has the signal is
-- due now. Run by the signal after it committed and by the park after the
-- give-back committed (each its own statement, so its own snapshot): whichever
-- runs second sees both.
UPDATE {schema}.alk_jobs SET run_at = {now}
WHERE id = %(id)s AND state = 'pending' AND run_at > {now}
  AND EXISTS (SELECT 1 FROM {schema}.alk_signals WHERE job_id = %(id)s AND name = %(name)s)
  AND EXISTS (SELECT 1 FROM {schema}.alk_steps
              WHERE job_id = %(id)s AND name = '@wait:' || %(name)s)
RETURNING queue;

-- name: life_purge
-- The sweep: rows of the queue's jobs that are gone (attempts and progress stay
-- while a kept result does, and for GONE_LIFE_KEPT_S after the newest of them, a
-- job's attempts together; steps and signals only while the job is live or dead).
WITH gone AS (
    SELECT DISTINCT job_id FROM (
        SELECT job_id FROM {schema}.alk_attempts WHERE queue = %(queue)s
        UNION ALL SELECT job_id FROM {schema}.alk_progress WHERE queue = %(queue)s
        UNION ALL SELECT job_id FROM {schema}.alk_steps WHERE queue = %(queue)s
        UNION ALL SELECT job_id FROM {schema}.alk_signals WHERE queue = %(queue)s
    ) AS t
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.alk_jobs j WHERE j.id = t.job_id)
      AND NOT EXISTS (SELECT 1 FROM {schema}.alk_dead d WHERE d.id = t.job_id)
), kept AS (
    SELECT job_id FROM gone
    WHERE EXISTS (SELECT 1 FROM {schema}.alk_results r WHERE r.id = gone.job_id)
), a AS (
    DELETE FROM {schema}.alk_attempts AS t WHERE job_id IN (SELECT job_id FROM gone)
      AND job_id NOT IN (SELECT job_id FROM kept)
      AND NOT EXISTS (SELECT 1 FROM {schema}.alk_attempts f WHERE f.job_id = t.job_id
                      AND f.finished_at > {now} - make_interval(secs => %(kept)s::float8))
    RETURNING 1
), p AS (
    DELETE FROM {schema}.alk_progress WHERE job_id IN (SELECT job_id FROM gone)
      AND job_id NOT IN (SELECT job_id FROM kept)
      AND updated_at <= {now} - make_interval(secs => %(kept)s::float8) RETURNING 1
), s AS (
    DELETE FROM {schema}.alk_steps WHERE job_id IN (SELECT job_id FROM gone) RETURNING 1
), g AS (
    DELETE FROM {schema}.alk_signals WHERE job_id IN (SELECT job_id FROM gone) RETURNING 1
)
SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM p) + (SELECT count(*) FROM s)
       + (SELECT count(*) FROM g);

-- `alkstore copy` (core/tables.py): the life tables, keyset pages and row writes.

-- name: copy_read_attempts
SELECT id, job_id, queue, attempt, worker_id, host, claimed_at, finished_at, outcome, error,
       trimmed
FROM {schema}.alk_attempts WHERE id > %s ORDER BY id LIMIT %s;

-- name: copy_write_attempts
-- The row with its id; the id sequence is moved past it (the destination is empty).
WITH ins AS (
    INSERT INTO {schema}.alk_attempts (id, job_id, queue, attempt, worker_id, host, claimed_at,
                                       finished_at, outcome, error, trimmed)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
    RETURNING id
)
SELECT setval(pg_get_serial_sequence('{schema}.alk_attempts', 'id'), ins.id) FROM ins;

-- name: copy_read_progress
SELECT job_id, queue, attempt, value, message, updated_at
FROM {schema}.alk_progress WHERE job_id > %s ORDER BY job_id LIMIT %s;

-- name: copy_write_progress
INSERT INTO {schema}.alk_progress (job_id, queue, attempt, value, message, updated_at)
VALUES (%s, %s, %s, %s, %s, %s);

-- name: copy_read_steps
SELECT job_id, name, queue, value, attempt, done_at
FROM {schema}.alk_steps WHERE (job_id, name COLLATE "C") > (%s, %s)
ORDER BY job_id, name COLLATE "C" LIMIT %s;

-- name: copy_write_steps
INSERT INTO {schema}.alk_steps (job_id, name, queue, value, attempt, done_at)
VALUES (%s, %s, %s, %s, %s, %s);

-- name: copy_read_signals
SELECT job_id, name, queue, payload, sent_at
FROM {schema}.alk_signals WHERE (job_id, name COLLATE "C") > (%s, %s)
ORDER BY job_id, name COLLATE "C" LIMIT %s;

-- name: copy_write_signals
INSERT INTO {schema}.alk_signals (job_id, name, queue, payload, sent_at)
VALUES (%s, %s, %s, %s, %s);
