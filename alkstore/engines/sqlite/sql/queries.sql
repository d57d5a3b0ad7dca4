-- Named queries of the SQLite engine. Parameters are named (:now, :queue, ...);
-- :now is the one clock reading of the operation, taken by the engine.

-- name: insert_job
-- One live row; run_at and expires_at are already resolved against :now.
INSERT INTO alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: last_id
SELECT last_insert_rowid();

-- name: sweep_exhausted_copy
-- Pre-claim sweep, step 1: lapsed claims with no attempts left go to dead.
INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, worker_id,
                      claim_expires_at, last_error, died_at)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       'max attempts exceeded', :now
FROM alk_jobs
WHERE queue = :queue AND state = 'processing' AND claim_expires_at < :now
  AND attempts >= max_attempts;

-- name: sweep_exhausted_delete
-- Pre-claim sweep, step 2 (same transaction, same predicate).
DELETE FROM alk_jobs
WHERE queue = :queue AND state = 'processing' AND claim_expires_at < :now
  AND attempts >= max_attempts;

-- name: claim
-- Claim up to :n rows in claim order. Two arms, each walking its own partial
-- index in (priority DESC, run_at, id) order, merged by SQLite's compound
-- ORDER BY so LIMIT stops early instead of sorting the backlog.
UPDATE alk_jobs
SET state = 'processing',
    attempts = attempts + 1,
    worker_id = :worker,
    claim_expires_at = :now + visibility_timeout_s
WHERE id IN (
    SELECT id FROM (
        SELECT id, priority, run_at FROM alk_jobs INDEXED BY alk_jobs_pending_claim
        WHERE queue = :queue AND state = 'pending' AND run_at <= :now
          AND (expires_at IS NULL OR expires_at > :now)
        UNION ALL
        SELECT id, priority, run_at FROM alk_jobs INDEXED BY alk_jobs_processing
        WHERE queue = :queue AND state = 'processing' AND claim_expires_at < :now
          AND attempts < max_attempts
          AND (expires_at IS NULL OR expires_at > :now)
        ORDER BY priority DESC, run_at, id
        LIMIT :n
    )
)
RETURNING id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
          visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
          last_error, NULL;

-- name: ack
-- The fenced delete of one claimed row.
DELETE FROM alk_jobs
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now;

-- name: retry
-- Fenced: back to pending at :run_at with the caller's error; claimant cleared.
UPDATE alk_jobs
SET state = 'pending', run_at = :run_at, last_error = :error,
    worker_id = NULL, claim_expires_at = NULL
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now;

-- name: dead_letter_copy
-- Fenced move to dead, step 1 (copy); step 2 deletes by id in the same transaction.
INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, worker_id,
                      claim_expires_at, last_error, died_at)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       :error, :now
FROM alk_jobs
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now;

-- name: delete_by_id
DELETE FROM alk_jobs WHERE id = :id;

-- name: heartbeat
-- Fenced absolute reset of the claim deadline (not additive).
UPDATE alk_jobs
SET claim_expires_at = :now + COALESCE(:extend, visibility_timeout_s)
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now;

-- name: ack_batch
-- Every listed row of this queue that is processing with an unexpired claim.
-- Driven by the primary key (the unary + keeps the planner off the processing
-- index, which would scan every in-flight row of the queue).
DELETE FROM alk_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND +queue = :queue AND +state = 'processing' AND +claim_expires_at >= :now;

-- name: cancel
DELETE FROM alk_jobs WHERE id = :id AND queue = :queue;

-- name: get_job
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, NULL
FROM alk_jobs WHERE id = :id AND queue = :queue
UNION ALL
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at
FROM alk_dead WHERE id = :id AND queue = :queue;

-- name: expire_copy
-- sweep_expired, step 1: every live row past its expiry, either state, to dead.
INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, worker_id,
                      claim_expires_at, last_error, died_at)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       'expired', :now
FROM alk_jobs INDEXED BY alk_jobs_expiry
WHERE queue = :queue AND expires_at IS NOT NULL AND expires_at <= :now;

-- name: expire_delete
DELETE FROM alk_jobs
WHERE queue = :queue AND expires_at IS NOT NULL AND expires_at <= :now;

-- name: purge_dead
-- Retention: dead rows of this queue that died before :cutoff.
DELETE FROM alk_dead WHERE queue = :queue AND died_at < :cutoff;

-- name: next_due
-- The earliest future moment something of this queue becomes claimable.
SELECT min(t) FROM (
    SELECT min(run_at) AS t FROM alk_jobs
    WHERE queue = :queue AND state = 'pending' AND run_at > :now
    UNION ALL
    SELECT min(claim_expires_at) AS t FROM alk_jobs
    WHERE queue = :queue AND state = 'processing' AND claim_expires_at >= :now
);

-- name: insert_note
INSERT INTO alk_notes (channel, payload) VALUES (?, ?);

-- name: trim_notes
-- Keep the newest notes only; listeners further behind than this see a gap.
DELETE FROM alk_notes WHERE id <= :below;

-- name: max_note
SELECT COALESCE(max(id), 0) FROM alk_notes;

-- name: notes_after
SELECT id, channel, payload FROM alk_notes WHERE id > :cursor ORDER BY id LIMIT 10000;
