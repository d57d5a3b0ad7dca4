-- A job's life (schema 9): attempt history, progress, durable steps, signals.
-- Loaded beside queries.sql (migrator.QUERIES). "Fenced" below is the handle
-- operations' fence: the row is processing, its claim not lapsed and its
-- attempts still the writer's.

-- name: life_add_attempt
-- One finished attempt, as the worker's completer recorded it.
INSERT INTO alk_attempts (job_id, queue, attempt, worker_id, host, claimed_at, finished_at,
                          outcome, error)
VALUES (:job_id, :queue, :attempt, :worker_id, :host, :claimed_at, :finished_at, :outcome, :error);

-- name: life_trim_attempts
-- Keep the job's newest :keep attempts.
DELETE FROM alk_attempts WHERE job_id = :job_id AND id <= (
    SELECT id FROM alk_attempts WHERE job_id = :job_id ORDER BY id DESC LIMIT 1 OFFSET :keep);

-- name: life_mark_trimmed
-- After a trim: the oldest row left says older ones were cut (they are not lost).
UPDATE alk_attempts SET trimmed = 1
WHERE id = (SELECT min(id) FROM alk_attempts WHERE job_id = :job_id);

-- name: life_attempts
SELECT attempt, worker_id, host, claimed_at, finished_at, outcome, error, trimmed
FROM alk_attempts WHERE job_id = :id AND queue = :queue ORDER BY id;

-- name: life_put_progress
-- Fenced upsert of the job's latest progress.
INSERT INTO alk_progress (job_id, queue, attempt, value, message, updated_at)
SELECT id, queue, attempts, :value, :message, :now FROM alk_jobs
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now
ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt, value = excluded.value,
    message = excluded.message, updated_at = excluded.updated_at;

-- name: life_progress
SELECT attempt, value, message, updated_at FROM alk_progress
WHERE job_id = :id AND queue = :queue;

-- name: life_put_step
-- Fenced insert of a completed step's JSON result (the first one stays).
INSERT INTO alk_steps (job_id, name, queue, value, attempt, done_at)
SELECT id, :name, queue, :value, attempts, :now FROM alk_jobs
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now
ON CONFLICT (job_id, name) DO NOTHING;

-- name: life_steps
SELECT name, value FROM alk_steps WHERE job_id = :id AND queue = :queue;

-- name: life_job_queue
SELECT queue FROM alk_jobs WHERE id = :id;

-- name: life_put_signal
INSERT INTO alk_signals (job_id, name, queue, payload, sent_at)
VALUES (:id, :name, :queue, :payload, :now)
ON CONFLICT (job_id, name) DO NOTHING;

-- name: life_signal
SELECT payload FROM alk_signals WHERE job_id = :id AND queue = :queue AND name = :name;

-- name: life_poke
-- A job parked on signal :name (its wait step is stored) that has the signal is
-- due now. Run by the signal after it committed and by the park after the
-- give-back committed: whichever runs second sees both.
UPDATE alk_jobs SET run_at = :now
WHERE id = :id AND state = 'pending' AND run_at > :now
  AND EXISTS (SELECT 1 FROM alk_signals WHERE job_id = :id AND name = :name)
  AND EXISTS (SELECT 1 FROM alk_steps WHERE job_id = :id AND name = '@wait:' || :name);

-- name: life_purge_attempts
-- The sweep: rows of the queue's jobs that are gone (not live, not dead, no kept result)
-- and whose newest record is older than :cutoff (a job's attempts go together: a
-- number missing from a history reads as lost).
DELETE FROM alk_attempts WHERE queue = :queue
  AND NOT EXISTS (SELECT 1 FROM alk_jobs j WHERE j.id = alk_attempts.job_id)
  AND NOT EXISTS (SELECT 1 FROM alk_dead d WHERE d.id = alk_attempts.job_id)
  AND NOT EXISTS (SELECT 1 FROM alk_results r WHERE r.id = alk_attempts.job_id)
  AND NOT EXISTS (SELECT 1 FROM alk_attempts f
                  WHERE f.job_id = alk_attempts.job_id AND f.finished_at > :cutoff);

-- name: life_purge_progress
DELETE FROM alk_progress WHERE queue = :queue AND updated_at <= :cutoff
  AND NOT EXISTS (SELECT 1 FROM alk_jobs j WHERE j.id = alk_progress.job_id)
  AND NOT EXISTS (SELECT 1 FROM alk_dead d WHERE d.id = alk_progress.job_id)
  AND NOT EXISTS (SELECT 1 FROM alk_results r WHERE r.id = alk_progress.job_id);

-- name: life_purge_steps
DELETE FROM alk_steps WHERE queue = :queue
  AND NOT EXISTS (SELECT 1 FROM alk_jobs j WHERE j.id = alk_steps.job_id)
  AND NOT EXISTS (SELECT 1 FROM alk_dead d WHERE d.id = alk_steps.job_id);

-- name: life_purge_signals
DELETE FROM alk_signals WHERE queue = :queue
  AND NOT EXISTS (SELECT 1 FROM alk_jobs j WHERE j.id = alk_signals.job_id)
  AND NOT EXISTS (SELECT 1 FROM alk_dead d WHERE d.id = alk_signals.job_id);

-- `alkstore copy` (core/tables.py): the life tables, keyset pages and row writes.

-- name: copy_read_attempts
SELECT id, job_id, queue, attempt, worker_id, host, claimed_at, finished_at, outcome, error,
       trimmed
FROM alk_attempts WHERE id > ? ORDER BY id LIMIT ?;

-- name: copy_write_attempts
-- (AUTOINCREMENT moves past an explicit id by itself.)
INSERT INTO alk_attempts (id, job_id, queue, attempt, worker_id, host, claimed_at, finished_at,
                          outcome, error, trimmed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: copy_read_progress
SELECT job_id, queue, attempt, value, message, updated_at
FROM alk_progress WHERE job_id > ? ORDER BY job_id LIMIT ?;

-- name: copy_write_progress
INSERT INTO alk_progress (job_id, queue, attempt, value, message, updated_at)
VALUES (?, ?, ?, ?, ?, ?);

-- name: copy_read_steps
SELECT job_id, name, queue, value, attempt, done_at
FROM alk_steps WHERE (job_id, name) > (?, ?) ORDER BY job_id, name LIMIT ?;

-- name: copy_write_steps
INSERT INTO alk_steps (job_id, name, queue, value, attempt, done_at) VALUES (?, ?, ?, ?, ?, ?);

-- name: copy_read_signals
SELECT job_id, name, queue, payload, sent_at
FROM alk_signals WHERE (job_id, name) > (?, ?) ORDER BY job_id, name LIMIT ?;

-- name: copy_write_signals
INSERT INTO alk_signals (job_id, name, queue, payload, sent_at) VALUES (?, ?, ?, ?, ?);
