-- Named queries of the SQLite engine. Parameters are named (:now, :queue, ...);
-- :now is the one clock reading of the operation, taken by the engine.

-- name: insert_job
-- One live row; run_at and expires_at are already resolved against :now.
INSERT INTO alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, partition_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: last_id
SELECT last_insert_rowid();

-- name: insert_keyed_job
-- One live row with a dedupe key: the unique index alk_jobs_dedupe makes a
-- live duplicate do nothing (no row returned).
INSERT INTO alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, partition_key, dedupe_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
RETURNING id, dedupe_key;

-- name: debounce_pending
-- The pending job holding a debounce key, if any (the single writer makes the
-- look-up and the write that follows one step).
SELECT id FROM alk_jobs INDEXED BY alk_jobs_debounce
WHERE queue = :queue AND debounce_key = :key AND state = 'pending';

-- name: debounce_replace
-- Latest wins: the pending job's payload, and with a debounce its run_at pushed.
UPDATE alk_jobs SET payload = :payload, run_at = COALESCE(:run_at, run_at) WHERE id = :id;

-- name: insert_debounced
INSERT INTO alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, partition_key, debounce_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: live_key
SELECT dedupe_key, id FROM alk_jobs WHERE queue = ? AND dedupe_key = ?;

-- name: take_window
-- Take a key's dedupe window unless an unexpired one holds it (a row back: taken).
INSERT INTO alk_dedupe (queue, dedupe_key, job_id, expires_at) VALUES (?, ?, 0, ?)
ON CONFLICT (queue, dedupe_key) DO UPDATE SET job_id = 0, expires_at = excluded.expires_at
WHERE alk_dedupe.expires_at <= ?
RETURNING dedupe_key;

-- name: window_job
SELECT dedupe_key, job_id FROM alk_dedupe WHERE queue = ? AND dedupe_key = ?;

-- name: set_window_job
UPDATE alk_dedupe SET job_id = ? WHERE queue = ? AND dedupe_key = ?;

-- name: insert_result
-- The kept result of a fenced ack, written in the ack's transaction.
INSERT INTO alk_results (id, queue, outcome, value, attempts, finished_at, expires_at)
VALUES (:id, :queue, 'success', :value, :attempts, :now, :now + :keep)
ON CONFLICT (id) DO UPDATE SET value = excluded.value, attempts = excluded.attempts,
    finished_at = excluded.finished_at, expires_at = excluded.expires_at;

-- name: outcomes
-- What became of the listed jobs (of one queue, or any if :queue is NULL):
-- kept result, dead row or live row.
SELECT id, queue, outcome, value, NULL, attempts, finished_at FROM alk_results
WHERE (:queue IS NULL OR queue = :queue) AND id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT id, queue, 'dead', NULL, last_error, attempts, died_at FROM alk_dead
WHERE (:queue IS NULL OR queue = :queue) AND id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT id, queue, state, NULL, last_error, attempts, NULL FROM alk_jobs
WHERE (:queue IS NULL OR queue = :queue) AND id IN (SELECT value FROM json_each(:ids));

-- name: purge_results
-- A parent's result stays while an edge to a dependent that has not finished does.
DELETE FROM alk_results WHERE queue = :queue AND expires_at <= :now
  AND NOT EXISTS (SELECT 1 FROM alk_deps WHERE parent = alk_results.id);

-- name: purge_windows
DELETE FROM alk_dedupe WHERE queue = :queue AND expires_at <= :now;

-- name: sweep_exhausted_copy
-- Pre-claim sweep, step 1: lapsed claims with no attempts left go to dead.
INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, worker_id,
                      claim_expires_at, last_error, died_at, dedupe_key, partition_key)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       :exhausted_error, :now, dedupe_key, partition_key
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
          last_error, NULL, dedupe_key, partition_key;

-- name: lapsed_ids
-- Lapsed claims that a claim may take over (usually none): their holders are
-- told once the claim commits.
SELECT id FROM alk_jobs INDEXED BY alk_jobs_processing
WHERE queue = :queue AND state = 'processing' AND claim_expires_at < :now
  AND attempts < max_attempts;

-- name: claim_candidates
-- A partition-limited claim's candidates: both claimable arms in claim order
-- with their partition keys (core/flow.py picks those whose partition has room).
SELECT id, partition_key FROM (
    SELECT id, priority, run_at, partition_key FROM alk_jobs INDEXED BY alk_jobs_pending_claim
    WHERE queue = :queue AND state = 'pending' AND run_at <= :now
      AND (expires_at IS NULL OR expires_at > :now)
    UNION ALL
    SELECT id, priority, run_at, partition_key FROM alk_jobs INDEXED BY alk_jobs_processing
    WHERE queue = :queue AND state = 'processing' AND claim_expires_at < :now
      AND attempts < max_attempts
      AND (expires_at IS NULL OR expires_at > :now)
    ORDER BY priority DESC, run_at, id
    LIMIT :window
);

-- name: claim_ids
-- Claim the listed candidates (read in this same write transaction).
UPDATE alk_jobs
SET state = 'processing',
    attempts = attempts + 1,
    worker_id = :worker,
    claim_expires_at = :now + visibility_timeout_s
WHERE id IN (SELECT value FROM json_each(:ids)) AND +queue = :queue
RETURNING id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
          visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
          last_error, NULL, dedupe_key, partition_key;

-- name: count_running
-- Unexpired claims of a queue (a lapsed claim no longer holds a slot).
SELECT count(*) FROM alk_jobs INDEXED BY alk_jobs_processing
WHERE queue = :queue AND state = 'processing' AND claim_expires_at >= :now;

-- name: running_partitions
SELECT partition_key, count(*) FROM alk_jobs INDEXED BY alk_jobs_partition
WHERE queue = :queue AND state = 'processing' AND partition_key IS NOT NULL
  AND claim_expires_at >= :now
GROUP BY partition_key;

-- name: queue_settings
SELECT queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat,
       fair, aging_s
FROM alk_queues WHERE queue = :queue;

-- name: all_queue_settings
SELECT queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat,
       fair, aging_s
FROM alk_queues ORDER BY queue;

-- name: set_paused
INSERT INTO alk_queues (queue, paused) VALUES (:queue, :paused)
ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused;

-- name: set_limits
-- New limits replace the old ones; the rate limiter starts afresh.
INSERT INTO alk_queues (queue, concurrency, partition_concurrency, rate_count, rate_period_s,
                        burst, tat)
VALUES (:queue, :concurrency, :partition_concurrency, :rate_count, :rate_period_s, :burst, NULL)
ON CONFLICT (queue) DO UPDATE
SET concurrency = excluded.concurrency, partition_concurrency = excluded.partition_concurrency,
    rate_count = excluded.rate_count, rate_period_s = excluded.rate_period_s,
    burst = excluded.burst, tat = NULL;

-- name: set_tat
UPDATE alk_queues SET tat = :tat WHERE queue = :queue;

-- name: fair_touch
-- A fair queue's key cursor for an enqueued partition key (core/fair.py): a
-- new key starts at the queue's smallest vtime; an existing one is kept.
INSERT INTO alk_fair (queue, partition_key, vtime)
SELECT :queue, :key, COALESCE((SELECT min(vtime) FROM alk_fair WHERE queue = :queue), 0)
WHERE EXISTS (SELECT 1 FROM alk_queues WHERE queue = :queue AND fair)
ON CONFLICT (queue, partition_key) DO NOTHING;

-- name: fair_cursors
-- A fair claim, step 1: the :window key cursors of smallest vtime (the single
-- writer makes this claim the queue's only one; nothing to lock).
SELECT c.partition_key, c.vtime, COALESCE(w.weight, 1.0)
FROM alk_fair AS c INDEXED BY alk_fair_order
LEFT JOIN alk_fair_weights AS w ON w.queue = c.queue AND w.partition_key = c.partition_key
WHERE c.queue = :queue
ORDER BY c.vtime, c.partition_key
LIMIT :window;

-- name: fair_heads
-- A fair claim, step 2, every key read in one statement: per key of the JSON
-- array :keys, its best :most claimable jobs (both arms on their own partial
-- index, merged by the compound ORDER BY, so each probe stops after :most
-- entries). SQLite's LIMIT cannot name the outer row: the engine keeps each
-- key's own limit of these, in claim order (priority, run_at, id come along).
SELECT k.value, h.id, h.priority, h.run_at
FROM json_each(:keys) AS k JOIN alk_jobs AS h ON h.id IN (
    SELECT id FROM (
        SELECT id, priority, run_at FROM alk_jobs INDEXED BY alk_jobs_fair
        WHERE queue = :queue AND partition_key = k.value AND state = 'pending'
          AND run_at <= :now AND (expires_at IS NULL OR expires_at > :now)
        UNION ALL
        SELECT id, priority, run_at FROM alk_jobs INDEXED BY alk_jobs_partition
        WHERE queue = :queue AND partition_key = k.value AND state = 'processing'
          AND claim_expires_at < :now AND attempts < max_attempts
          AND (expires_at IS NULL OR expires_at > :now)
        ORDER BY priority DESC, run_at, id
        LIMIT :most));

-- name: fair_heads_pending
-- fair_heads when the queue has no lapsed claim (the claim's lapsed_ids read
-- none): the pending arm alone, one index probe per key instead of two.
SELECT k.value, h.id, h.priority, h.run_at
FROM json_each(:keys) AS k JOIN alk_jobs AS h ON h.id IN (
    SELECT id FROM alk_jobs INDEXED BY alk_jobs_fair
    WHERE queue = :queue AND partition_key = k.value AND state = 'pending'
      AND run_at <= :now AND (expires_at IS NULL OR expires_at > :now)
    ORDER BY priority DESC, run_at, id
    LIMIT :most);

-- name: fair_head_first
-- fair_heads_pending when every key of :keys is read one head deep: a scalar
-- probe of alk_jobs_fair per key, its best due job's id or NULL (no join of
-- the heads back to alk_jobs: half the cost of the join form for 12 keys).
SELECT k.value, (SELECT id FROM alk_jobs INDEXED BY alk_jobs_fair
                 WHERE queue = :queue AND partition_key = k.value AND state = 'pending'
                   AND run_at <= :now AND (expires_at IS NULL OR expires_at > :now)
                 ORDER BY priority DESC, run_at, id
                 LIMIT 1)
FROM json_each(:keys) AS k;

-- name: fair_live
-- The keys of :keys (a JSON array; keys without claimable jobs) that still have
-- live jobs (running or delayed).
SELECT k.value FROM json_each(:keys) AS k
WHERE EXISTS (SELECT 1 FROM alk_jobs INDEXED BY alk_jobs_fair
              WHERE queue = :queue AND partition_key = k.value AND state = 'pending')
   OR EXISTS (SELECT 1 FROM alk_jobs INDEXED BY alk_jobs_partition
              WHERE queue = :queue AND partition_key = k.value AND state = 'processing');

-- name: fair_move
-- A fair claim, last step: a served key's new vtime (run for every served key
-- in one executemany: a primary-key update each, the cheapest form measured).
UPDATE alk_fair SET vtime = :vtime WHERE queue = :queue AND partition_key = :key;

-- name: fair_prune
-- A fair claim, last step too: the cursors of the keys of :keys (a JSON array)
-- found without live jobs dropped.
DELETE FROM alk_fair WHERE queue = :queue AND partition_key IN (SELECT value FROM json_each(:keys));

-- name: set_fair
INSERT INTO alk_queues (queue, fair) VALUES (:queue, :fair)
ON CONFLICT (queue) DO UPDATE SET fair = excluded.fair;

-- name: seed_fair
-- Fairness switched on: a cursor for every key with live jobs (one scan of the
-- queue's rows, here and never in a claim), at the queue's smallest vtime.
INSERT INTO alk_fair (queue, partition_key, vtime)
SELECT DISTINCT :queue, partition_key,
       COALESCE((SELECT min(vtime) FROM alk_fair WHERE queue = :queue), 0)
FROM alk_jobs WHERE queue = :queue AND partition_key IS NOT NULL
ON CONFLICT (queue, partition_key) DO NOTHING;

-- name: clear_fair
DELETE FROM alk_fair WHERE queue = :queue;

-- name: clear_weights
DELETE FROM alk_fair_weights WHERE queue = :queue;

-- name: add_weight
INSERT INTO alk_fair_weights (queue, partition_key, weight) VALUES (:queue, :key, :weight);

-- name: fair_weights
SELECT partition_key, weight FROM alk_fair_weights WHERE queue = :queue ORDER BY partition_key;

-- name: set_aging
INSERT INTO alk_queues (queue, aging_s) VALUES (:queue, :aging_s)
ON CONFLICT (queue) DO UPDATE SET aging_s = excluded.aging_s;

-- name: ack
-- The fenced delete of one claimed row.
DELETE FROM alk_jobs
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now;

-- name: ack_many
-- The fenced delete of many claimed rows in one statement: each (id, queue,
-- attempts) of the JSON array :items under the same fence as `ack`, driven by
-- the primary key (the unary + keeps the planner off the processing index);
-- RETURNING says which were deleted.
DELETE FROM alk_jobs
WHERE (id, queue, attempts) IN (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]')
    FROM json_each(:items))
  AND +state = 'processing' AND +claim_expires_at >= :now
RETURNING id, attempts, queue;

-- name: ack_receipt
-- The acking worker's receipt (docs/contract.md, "Ack receipts"), read in the
-- ack batch's own write transaction.
SELECT token, refused FROM alk_ack_receipts WHERE owner = :owner;

-- name: put_ack_receipt
INSERT INTO alk_ack_receipts (owner, token, refused, at)
VALUES (:owner, :token, :refused, :now)
ON CONFLICT (owner) DO UPDATE
SET token = excluded.token, refused = excluded.refused, at = excluded.at;

-- name: drop_ack_receipts
-- A stopping worker's own receipt, and every receipt older than :older_s
-- seconds (of workers that died; a live worker's next batch writes its row again).
DELETE FROM alk_ack_receipts WHERE owner = :owner OR at < :now - :older_s;

-- name: retry
-- Fenced: back to pending at :run_at with the caller's error; claimant cleared.
-- A claimed job has left its debounce key (a newer pending job may hold it).
UPDATE alk_jobs
SET state = 'pending', run_at = :run_at, last_error = :error,
    worker_id = NULL, claim_expires_at = NULL, debounce_key = NULL
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now;

-- name: release
-- Fenced give-back with this attempt uncounted: a claim that never ran keeps
-- its place in line (:run_at NULL), a snooze is due at :run_at; last_error kept.
UPDATE alk_jobs
SET state = 'pending', attempts = attempts - 1, run_at = COALESCE(:run_at, run_at),
    worker_id = NULL, claim_expires_at = NULL, debounce_key = NULL
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now;

-- name: dead_letter_copy
-- Fenced move to dead, step 1 (copy); step 2 deletes by id in the same transaction.
INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, worker_id,
                      claim_expires_at, last_error, died_at, dedupe_key, partition_key)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       :error, :now, dedupe_key, partition_key
FROM alk_jobs
WHERE id = :id AND queue = :queue AND state = 'processing' AND attempts = :attempts
  AND claim_expires_at >= :now;

-- name: dead_letter_delete
-- Fenced move to dead, step 2 (same transaction): the row step 1 copied.
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
       last_error, NULL, dedupe_key, partition_key
FROM alk_jobs WHERE id = :id AND queue = :queue
UNION ALL
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM alk_dead WHERE id = :id AND queue = :queue;

-- name: expire_copy
-- sweep_expired, step 1: every live row past its expiry, either state, to dead.
INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, worker_id,
                      claim_expires_at, last_error, died_at, dedupe_key, partition_key)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       :expired_error, :now, dedupe_key, partition_key
FROM alk_jobs INDEXED BY alk_jobs_expiry
WHERE queue = :queue AND expires_at IS NOT NULL AND expires_at <= :now;

-- name: expire_delete
DELETE FROM alk_jobs
WHERE queue = :queue AND expires_at IS NOT NULL AND expires_at <= :now;

-- name: purge_dead
-- Retention: dead rows of this queue that died before :cutoff.
DELETE FROM alk_dead WHERE queue = :queue AND died_at < :cutoff;

-- name: aging_settings
-- Priority aging (core/aging.py), step 1: the queue's interval and its top due
-- priority among jobs never promoted (the front of alk_jobs_pending_claim, past
-- the few promoted jobs there).
SELECT s.aging_s,
       (SELECT max(priority) FROM alk_jobs INDEXED BY alk_jobs_pending_claim
        WHERE queue = :queue AND state = 'pending' AND run_at <= :now
          AND promoted_at IS NULL)
FROM alk_queues AS s
WHERE s.queue = :queue AND s.aging_s IS NOT NULL;

-- name: promote
-- Priority aging, step 2: each due pending job below :top, or promoted already
-- and below :cap, that has waited k >= 1 intervals since it became due or was
-- last promoted gains k levels, at most to :cap; its promotion time moves on by
-- k intervals. SET reads the old row. A promoted job that reached :top climbs
-- on: level with the stream it would still wait behind the stream's older jobs.
UPDATE alk_jobs INDEXED BY alk_jobs_pending_claim
SET priority = min(priority + CAST((:now - max(COALESCE(promoted_at, run_at), run_at))
                                   / :aging_s AS INTEGER), :cap),
    promoted_at = max(COALESCE(promoted_at, run_at), run_at)
                  + CAST((:now - max(COALESCE(promoted_at, run_at), run_at)) / :aging_s AS INTEGER)
                    * :aging_s
WHERE queue = :queue AND state = 'pending' AND priority < :cap
  AND (priority < :top OR promoted_at IS NOT NULL)
  AND run_at <= :now - :aging_s
  AND max(COALESCE(promoted_at, run_at), run_at) <= :now - :aging_s;

-- name: next_due
-- The earliest future moment within :within seconds that something of this queue
-- becomes claimable (see the PostgreSQL query for why the look is bounded).
SELECT min(t) FROM (
    SELECT min(run_at) AS t FROM alk_jobs
    WHERE queue = :queue AND state = 'pending' AND run_at > :now AND run_at <= :now + :within
    UNION ALL
    SELECT min(claim_expires_at) AS t FROM alk_jobs
    WHERE queue = :queue AND state = 'processing' AND claim_expires_at >= :now
      AND claim_expires_at <= :now + :within
);

-- name: schedule_marks
SELECT name, last_tick, last_job FROM alk_schedules WHERE name IN (SELECT value FROM json_each(:names));

-- name: mark_schedule
-- Move a schedule's mark forward (never back: a stale worker cannot rewind it).
INSERT INTO alk_schedules (name, last_tick, last_job, updated_at)
VALUES (:name, :tick, :job, :now)
ON CONFLICT (name) DO UPDATE SET last_tick = excluded.last_tick,
    last_job = COALESCE(excluded.last_job, alk_schedules.last_job), updated_at = excluded.updated_at
WHERE excluded.last_tick > alk_schedules.last_tick;

-- name: insert_note
INSERT INTO alk_notes (channel, payload) VALUES (?, ?);

-- name: trim_notes
-- Keep the newest notes only; listeners further behind than this see a gap.
DELETE FROM alk_notes WHERE id <= :below;

-- name: max_note
SELECT COALESCE(max(id), 0) FROM alk_notes;

-- name: notes_after
SELECT id, channel, payload FROM alk_notes WHERE id > :cursor ORDER BY id LIMIT 10000;

-- Admin (alkstore/admin.py): reads and repairs beyond the queue contract.

-- name: admin_list_jobs
-- Live and dead rows of one queue (or one state) in id order after :after (a keyset
-- page, never an OFFSET); both arms are id-ordered, so the compound ORDER BY merges
-- them and LIMIT stops early.
SELECT * FROM (
    SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           last_error, NULL AS died_at, dedupe_key, partition_key
    FROM alk_jobs WHERE queue = :queue AND (:state IS NULL OR state = :state) AND id > :after
    UNION ALL
    SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           last_error, died_at, dedupe_key, partition_key
    FROM alk_dead WHERE queue = :queue AND (:state IS NULL OR :state = 'dead') AND id > :after
)
ORDER BY id LIMIT :limit;

-- name: admin_list_jobs_before
-- The page before :before: rows of one queue (or one state) with id < :before,
-- nearest first.
SELECT * FROM (
    SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           last_error, NULL AS died_at, dedupe_key, partition_key
    FROM alk_jobs WHERE queue = :queue AND (:state IS NULL OR state = :state) AND id < :before
    UNION ALL
    SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           last_error, died_at, dedupe_key, partition_key
    FROM alk_dead WHERE queue = :queue AND (:state IS NULL OR :state = 'dead') AND id < :before
)
ORDER BY id DESC LIMIT :limit;

-- fragment: live_row
-- A live job's columns as the admin listings return them (alk_jobs has no died_at).
id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
last_error, NULL AS died_at, dedupe_key, partition_key

-- name: admin_list_key
-- One partition key's pending and processing rows of a queue (or one of those two
-- states) in id order after :cursor: a keyset page. Each arm reads the key's rows
-- of its state from the partial index that holds them by key (pending:
-- alk_jobs_fair; processing: alk_jobs_partition) and keeps the page: a cost
-- bounded by the key's live jobs, not the queue's. No index holds the key of
-- blocked or dead rows: they are not listed here.
SELECT * FROM (
    SELECT * FROM (
        SELECT {live_row}
        FROM alk_jobs INDEXED BY alk_jobs_fair
        WHERE queue = :queue AND partition_key = :key AND state = 'pending'
          AND :state IS NOT 'processing' AND id > :cursor
        ORDER BY id LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT {live_row}
        FROM alk_jobs INDEXED BY alk_jobs_partition
        WHERE queue = :queue AND partition_key = :key AND state = 'processing'
          AND :state IS NOT 'pending' AND id > :cursor
        ORDER BY id LIMIT :limit)
)
ORDER BY id LIMIT :limit;

-- name: admin_list_key_before
-- The page before :cursor of admin_list_key, nearest first.
SELECT * FROM (
    SELECT * FROM (
        SELECT {live_row}
        FROM alk_jobs INDEXED BY alk_jobs_fair
        WHERE queue = :queue AND partition_key = :key AND state = 'pending'
          AND :state IS NOT 'processing' AND id < :cursor
        ORDER BY id DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (
        SELECT {live_row}
        FROM alk_jobs INDEXED BY alk_jobs_partition
        WHERE queue = :queue AND partition_key = :key AND state = 'processing'
          AND :state IS NOT 'pending' AND id < :cursor
        ORDER BY id DESC LIMIT :limit)
)
ORDER BY id DESC LIMIT :limit;

-- name: admin_dead_after
-- Dead rows of every queue with id > :after, in id order: a keyset page on the
-- primary key (the dashboard's /dead), never an OFFSET.
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM alk_dead
WHERE id > :after ORDER BY id LIMIT :limit;

-- name: admin_dead_before
-- The page before :before: dead rows with id < :before, nearest first.
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM alk_dead
WHERE id < :before ORDER BY id DESC LIMIT :limit;

-- name: admin_find_job
-- One row by id in any queue, live or dead (ids are unique across both tables).
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, NULL, dedupe_key, partition_key
FROM alk_jobs WHERE id = :id
UNION ALL
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM alk_dead WHERE id = :id;

-- name: admin_outcomes
-- The latest finished jobs of a queue, newest first: kept results and dead rows.
SELECT * FROM (
    SELECT * FROM (
        SELECT id, queue, outcome, value, NULL AS error, attempts, finished_at
        FROM alk_results WHERE queue = :queue ORDER BY finished_at DESC LIMIT :limit
    )
    UNION ALL
    SELECT * FROM (
        SELECT id, queue, 'dead', NULL, last_error, attempts, died_at
        FROM alk_dead WHERE queue = :queue ORDER BY died_at DESC LIMIT :limit
    )
)
ORDER BY finished_at DESC, id DESC LIMIT :limit;

-- name: admin_requeue_copy
-- Requeue, step 1: the dead row back to live pending with the values
-- alkstore.admin decides: :attempts, due at :run_at, and its expiry cleared
-- unless later than :expiry_cutoff. It keeps its id, payload, stamps, last_error
-- and partition key, and its dedupe key unless a live job holds that key now
-- (the unique index allows one).
INSERT INTO alk_jobs (id, queue, payload, state, priority, run_at, created_at, attempts,
                      max_attempts, visibility_timeout_s, retry_base_s, expires_at,
                      worker_id, claim_expires_at, last_error, dedupe_key, partition_key)
SELECT id, queue, payload, 'pending', priority, :run_at, created_at, :attempts,
       max_attempts, visibility_timeout_s, retry_base_s,
       CASE WHEN expires_at > :expiry_cutoff THEN expires_at END,
       NULL, NULL, last_error,
       CASE WHEN NOT EXISTS (SELECT 1 FROM alk_jobs AS l
                             WHERE l.queue = alk_dead.queue
                               AND l.dedupe_key = alk_dead.dedupe_key) THEN dedupe_key END,
       partition_key
FROM alk_dead WHERE id = :id
RETURNING queue, partition_key;

-- name: admin_requeue_delete
-- Requeue, step 2 (same transaction).
DELETE FROM alk_dead WHERE id = :id;

-- name: admin_stats
-- Per queue: due pending, delayed pending, processing, dead, oldest due run_at,
-- blocked.
SELECT queue, sum(pending), sum(delayed), sum(processing), sum(dead), min(oldest),
       sum(blocked)
FROM (
    SELECT queue,
           sum(state = 'pending' AND run_at <= :now) AS pending,
           sum(state = 'pending' AND run_at > :now) AS delayed,
           sum(state = 'processing') AS processing,
           0 AS dead,
           min(CASE WHEN state = 'pending' AND run_at <= :now THEN run_at END) AS oldest,
           sum(state = 'blocked') AS blocked
    FROM alk_jobs GROUP BY queue
    UNION ALL
    SELECT queue, 0, 0, 0, count(*), NULL, 0 FROM alk_dead GROUP BY queue
)
GROUP BY queue ORDER BY queue;

-- Live workers and outcome history (migration 0002).

-- name: worker_upsert
-- Register or refresh one worker (its heartbeat); started_at is kept on refresh.
INSERT INTO alk_workers (id, host, pid, queues, concurrency, running, started_at, last_seen)
VALUES (:id, :host, :pid, :queues, :concurrency, :running, :now, :now)
ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, running = excluded.running,
    last_seen = excluded.last_seen;

-- name: worker_delete
DELETE FROM alk_workers WHERE id = :id;

-- name: worker_purge
-- Workers not seen since :cutoff are gone for good.
DELETE FROM alk_workers WHERE last_seen < :cutoff;

-- name: worker_list
SELECT id, host, pid, queues, concurrency, running, started_at, last_seen,
       :now - last_seen
FROM alk_workers ORDER BY started_at, id;

-- name: worker_page_after
-- A keyset page of workers by id: those with id > :after, in id order.
SELECT id, host, pid, queues, concurrency, running, started_at, last_seen,
       :now - last_seen
FROM alk_workers WHERE id > :after ORDER BY id LIMIT :limit;

-- name: worker_page_before
-- The page before :before: workers with id < :before, nearest first.
SELECT id, host, pid, queues, concurrency, running, started_at, last_seen,
       :now - last_seen
FROM alk_workers WHERE id < :before ORDER BY id DESC LIMIT :limit;

-- name: outcome_add
INSERT INTO alk_outcomes (queue, minute, outcome, count)
VALUES (:queue, :minute, :outcome, :count)
ON CONFLICT (queue, minute, outcome) DO UPDATE SET count = count + excluded.count;

-- name: outcome_purge
DELETE FROM alk_outcomes WHERE minute < :cutoff;

-- name: outcome_history
-- Counts per queue, minute and outcome since :since (POSIX seconds), by minute.
SELECT queue, minute, outcome, count FROM alk_outcomes
WHERE minute >= :since ORDER BY minute, queue, outcome;

-- name: outcome_series
-- Counts per queue, bucket of :bucket seconds (its start, POSIX seconds) and outcome
-- since :since, of one :queue or all (NULL): the dashboard's charts of a day or a
-- week, summed here so a week of minutes is not sent to be added up in Python.
SELECT queue, minute - (minute % :bucket), outcome, sum(count) FROM alk_outcomes
WHERE minute >= :since AND (:queue IS NULL OR queue = :queue)
GROUP BY 1, 2, 3 ORDER BY 2, 1, 3;

-- Store copy (alkstore/copy.py): the tables of core/tables.py in its column order.
-- Keys are compared as row values; text in BINARY order, which is code point order.

-- name: copy_counts
-- Rows of each copied table, in core.tables order.
SELECT (SELECT count(*) FROM alk_queues),
       (SELECT count(*) FROM alk_jobs),
       (SELECT count(*) FROM alk_dead),
       (SELECT count(*) FROM alk_results),
       (SELECT count(*) FROM alk_dedupe),
       (SELECT count(*) FROM alk_schedules),
       (SELECT count(*) FROM alk_outcomes),
       (SELECT count(*) FROM alk_fair),
       (SELECT count(*) FROM alk_fair_weights),
       (SELECT count(*) FROM alk_attempts),
       (SELECT count(*) FROM alk_progress),
       (SELECT count(*) FROM alk_steps),
       (SELECT count(*) FROM alk_signals),
       (SELECT count(*) FROM alk_deps);

-- name: copy_read_queues
-- A page of alk_queues after a key, in key order.
SELECT queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat,
       fair, aging_s
FROM alk_queues
WHERE queue > ?
ORDER BY queue
LIMIT ?;

-- name: copy_write_queues
-- One copied row of alk_queues, as the source had it.
INSERT INTO alk_queues (queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat, fair, aging_s)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: copy_read_jobs
-- A page of alk_jobs after a key, in key order.
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, last_error, dedupe_key, partition_key, debounce_key, promoted_at, waiting, deps
FROM alk_jobs
WHERE id > ?
ORDER BY id
LIMIT ?;

-- name: copy_write_jobs
-- One copied row of alk_jobs, as the source had it.
INSERT INTO alk_jobs (id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, last_error, dedupe_key, partition_key, debounce_key, promoted_at, waiting, deps)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: copy_read_dead
-- A page of alk_dead after a key, in key order.
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, last_error, died_at, dedupe_key, partition_key
FROM alk_dead
WHERE id > ?
ORDER BY id
LIMIT ?;

-- name: copy_write_dead
-- One copied row of alk_dead, as the source had it.
INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, last_error, died_at, dedupe_key, partition_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: copy_read_results
-- A page of alk_results after a key, in key order.
SELECT id, queue, outcome, value, attempts, finished_at, expires_at
FROM alk_results
WHERE id > ?
ORDER BY id
LIMIT ?;

-- name: copy_write_results
-- One copied row of alk_results, as the source had it.
INSERT INTO alk_results (id, queue, outcome, value, attempts, finished_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: copy_read_dedupe
-- A page of alk_dedupe after a key, in key order.
SELECT queue, dedupe_key, job_id, expires_at
FROM alk_dedupe
WHERE (queue, dedupe_key) > (?, ?)
ORDER BY queue, dedupe_key
LIMIT ?;

-- name: copy_write_dedupe
-- One copied row of alk_dedupe, as the source had it.
INSERT INTO alk_dedupe (queue, dedupe_key, job_id, expires_at)
VALUES (?, ?, ?, ?);

-- name: copy_read_schedules
-- A page of alk_schedules after a key, in key order.
SELECT name, last_tick, last_job, updated_at
FROM alk_schedules
WHERE name > ?
ORDER BY name
LIMIT ?;

-- name: copy_write_schedules
-- One copied row of alk_schedules, as the source had it.
INSERT INTO alk_schedules (name, last_tick, last_job, updated_at)
VALUES (?, ?, ?, ?);

-- name: copy_read_outcomes
-- A page of alk_outcomes after a key, in key order.
SELECT queue, minute, outcome, count
FROM alk_outcomes
WHERE (queue, minute, outcome) > (?, ?, ?)
ORDER BY queue, minute, outcome
LIMIT ?;

-- name: copy_write_outcomes
-- One copied row of alk_outcomes, as the source had it.
INSERT INTO alk_outcomes (queue, minute, outcome, count)
VALUES (?, ?, ?, ?);

-- name: copy_last_id
-- The highest job id ever handed out (AUTOINCREMENT's counter; 0: none).
SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'alk_jobs'), 0);

-- name: copy_advance_ids
-- Move AUTOINCREMENT's counter up to ?: the next job gets the id after it.
UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'alk_jobs';

-- name: copy_start_ids
-- AUTOINCREMENT's counter of a table that never had a row.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'alk_jobs', ?1
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'alk_jobs');

-- `alkstore doctor` (engines/sqlite/health.py).

-- name: health_overdue
-- Claims still processing past their deadline, per queue.
SELECT queue, count(*), :now - min(claim_expires_at)
FROM alk_jobs
WHERE state = 'processing' AND claim_expires_at < :now
GROUP BY queue ORDER BY queue;

-- name: copy_read_fair
-- A page of alk_fair after a key, in key order.
SELECT queue, partition_key, vtime
FROM alk_fair
WHERE (queue, partition_key) > (?, ?)
ORDER BY queue, partition_key
LIMIT ?;

-- name: copy_write_fair
-- One copied row of alk_fair, as the source had it.
INSERT INTO alk_fair (queue, partition_key, vtime)
VALUES (?, ?, ?);

-- name: copy_read_fair_weights
-- A page of alk_fair_weights after a key, in key order.
SELECT queue, partition_key, weight
FROM alk_fair_weights
WHERE (queue, partition_key) > (?, ?)
ORDER BY queue, partition_key
LIMIT ?;

-- name: copy_write_fair_weights
-- One copied row of alk_fair_weights, as the source had it.
INSERT INTO alk_fair_weights (queue, partition_key, weight)
VALUES (?, ?, ?);

-- Dependencies (migration 0008; core/deps.py's flows, engines/sqlite/deps.py).

-- name: deps_mark_parents
-- The live parents of a new child get their dependents bit (the single writer
-- makes this and the parent's end one order: no ack comes between).
UPDATE alk_jobs SET deps = deps | 1
WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id;

-- name: deps_kept_results
SELECT id FROM alk_results WHERE id IN (SELECT value FROM json_each(:ids));

-- name: deps_dead_rows
SELECT id, last_error FROM alk_dead WHERE id IN (SELECT value FROM json_each(:ids));

-- name: deps_block
-- A new child: blocked while parents are waited for (else it stays pending).
UPDATE alk_jobs
SET state = CASE WHEN :waiting > 0 THEN 'blocked' ELSE state END,
    waiting = :waiting, deps = deps | :deps
WHERE id = :id;

-- name: deps_edge
INSERT INTO alk_deps (parent, child, policy, killed) VALUES (?, ?, ?, ?);

-- name: deps_kill_copy
-- A new child whose parent is already dead: dead at once (step 1, copy).
INSERT INTO alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
                      visibility_timeout_s, retry_base_s, expires_at, worker_id,
                      claim_expires_at, last_error, died_at, dedupe_key, partition_key)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       :error, :now, dedupe_key, partition_key
FROM alk_jobs WHERE id = :id;

-- name: deps_kill_delete
DELETE FROM alk_jobs WHERE id = :id;

-- name: deps_flags
-- A requeued job's bits, from its edges (the dead table keeps no flag).
UPDATE alk_jobs
SET deps = (deps & ~3)
         | (CASE WHEN EXISTS (SELECT 1 FROM alk_deps WHERE parent = :id) THEN 1 ELSE 0 END)
         | (CASE WHEN EXISTS (SELECT 1 FROM alk_deps AS d INDEXED BY alk_deps_child
                              WHERE d.child = :id) THEN 2 ELSE 0 END)
WHERE id = :id;

-- name: deps_killed_children
SELECT d.child FROM alk_deps AS d JOIN alk_dead AS x ON x.id = d.child
WHERE d.parent = :parent AND d.killed ORDER BY d.child;

-- name: deps_dead_parents
SELECT d.parent FROM alk_deps AS d JOIN alk_dead AS x ON x.id = d.parent
WHERE d.child = :child AND d.policy = 'success' ORDER BY d.parent;

-- name: deps_move_kill
UPDATE alk_deps SET killed = (parent = :to)
WHERE child = :child AND parent IN (:parent, :to);

-- name: deps_live_parents
SELECT count(*) FROM alk_deps AS d JOIN alk_jobs AS j ON j.id = d.parent
WHERE d.child = :child;

-- name: deps_revive_copy
-- A dead-lettered child back to live: blocked on its live parents (pending if none).
INSERT INTO alk_jobs (id, queue, payload, state, priority, run_at, created_at, attempts,
                      max_attempts, visibility_timeout_s, retry_base_s, expires_at,
                      worker_id, claim_expires_at, last_error, dedupe_key, partition_key,
                      waiting, deps)
SELECT id, queue, payload, CASE WHEN :waiting > 0 THEN 'blocked' ELSE 'pending' END,
       priority, run_at, created_at, 0, max_attempts, visibility_timeout_s, retry_base_s,
       expires_at, NULL, NULL, last_error,
       CASE WHEN NOT EXISTS (SELECT 1 FROM alk_jobs AS l
                             WHERE l.queue = alk_dead.queue
                               AND l.dedupe_key = alk_dead.dedupe_key) THEN dedupe_key END,
       partition_key, :waiting,
       2 | (CASE WHEN EXISTS (SELECT 1 FROM alk_deps WHERE parent = :id) THEN 1 ELSE 0 END)
FROM alk_dead WHERE id = :id
RETURNING queue;

-- name: deps_revive_delete
DELETE FROM alk_dead WHERE id = :id;

-- name: deps_revive_edges
UPDATE alk_deps SET killed = 0 WHERE child = :id;

-- name: deps_has_edges
SELECT EXISTS (SELECT 1 FROM alk_deps WHERE parent = :id)
    OR EXISTS (SELECT 1 FROM alk_deps INDEXED BY alk_deps_child WHERE child = :id);

-- name: deps_edges_of
-- The edges touching a job: (parent, child, policy, killed).
SELECT parent, child, policy, killed FROM alk_deps WHERE parent = :id
UNION
SELECT parent, child, policy, killed FROM alk_deps INDEXED BY alk_deps_child WHERE child = :id
ORDER BY 1, 2;

-- name: deps_mark_cancel
-- A cancel marks a row with dependents or parents first (deps bit 4): the
-- trigger then tells it from an ack.
UPDATE alk_jobs SET deps = deps | 4 WHERE id = :id AND queue = :queue AND deps <> 0;

-- name: deps_purge_edges
-- After a retention purge: the edges of children that are neither live nor dead.
DELETE FROM alk_deps WHERE child IN (
    SELECT child FROM alk_deps EXCEPT SELECT id FROM alk_jobs EXCEPT SELECT id FROM alk_dead);

-- name: copy_read_deps
-- A page of alk_deps after a key, in key order.
SELECT parent, child, policy, killed
FROM alk_deps
WHERE (parent, child) > (?, ?)
ORDER BY parent, child
LIMIT ?;

-- name: copy_write_deps
-- One copied row of alk_deps, as the source had it.
INSERT INTO alk_deps (parent, child, policy, killed)
VALUES (?, ?, ?, ?);

-- name: deps_woken
-- Before a write's COMMIT: the queues where the dependencies trigger made a
-- child pending (usually none), emptied.
DELETE FROM alk_deps_woken RETURNING queue;

-- name: space_free_pages
-- The file's pages on the freelist (freed by deletes, reused by inserts).
PRAGMA freelist_count;

-- name: space_pages
PRAGMA page_count;

-- name: space_release_page
-- One free page cut off the file's end (auto_vacuum=INCREMENTAL, migration
-- 0013; a no-op otherwise). The pragma frees one page per step of the
-- statement and Python's sqlite3 steps it once per execute: run it per page.
PRAGMA incremental_vacuum(1);

-- name: space_checkpoint
-- After pages were given back: copy the WAL into the main file, which a
-- complete checkpoint truncates to the new size (never waits for readers).
PRAGMA wal_checkpoint(PASSIVE);
