-- Named queries of the PostgreSQL engine. {schema} is the store's schema as a
-- quoted identifier, formatted once per engine; parameters are psycopg's
-- %(name)s placeholders (sent separately, never pasted). Every time is {now}:
-- now() in production; a test clock makes it COALESCE(%(now)s, now()). It is
-- the server's clock, read once per statement (each statement is its own
-- transaction in autocommit, so now() is one reading for the whole statement).

-- name: migration_try_lock
-- Serialises concurrent migrators of one schema: a session lock (a
-- no-transaction migration runs outside any transaction), taken before CREATE
-- SCHEMA IF NOT EXISTS, which is itself racy. Tried, not waited for: a session
-- blocked on the lock would hold a snapshot that CREATE INDEX CONCURRENTLY in
-- the holder waits for (a deadlock).
SELECT pg_try_advisory_lock(hashtextextended('alkstore.migrate:' || %(schema)s, 0));

-- name: migration_unlock
SELECT pg_advisory_unlock(hashtextextended('alkstore.migrate:' || %(schema)s, 0));

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: create_migrations
-- The version table: one row per applied migration.
CREATE TABLE IF NOT EXISTS {schema}.alk_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: schema_tables
-- Whether the schema and its version table exist, read from the catalog
-- (no DDL, no privilege beyond connecting), before anything else.
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s),
       EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = %(schema)s AND c.relname = 'alk_migrations');

-- name: schema_version
SELECT COALESCE(max(version), 0) FROM {schema}.alk_migrations;

-- name: record_migration
INSERT INTO {schema}.alk_migrations (version, name) VALUES (%(version)s, %(name)s);

-- name: insert_jobs
-- One row per payload, in array order (nextval runs in the order unnest yields
-- rows, so ids ascend with the payloads). The stamps are shared scalars;
-- run_at and expires_at resolve against this statement's now().
-- woken: with :wake, the queue's wake rides on this transaction (pg_notify,
-- delivered at its commit; the waker's leading edge, waker.py); a one-time
-- filter, so without it no notification and no notify lock.
WITH inserted AS (
    INSERT INTO {schema}.alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                                   visibility_timeout_s, retry_base_s, expires_at, partition_key)
    SELECT %(queue)s::text, p, %(priority)s::integer,
           COALESCE(%(run_at)s::timestamptz, {now} + make_interval(secs => %(delay)s::float8)),
           {now}, %(max_attempts)s::integer, %(visibility)s::float8, %(retry_base)s::float8,
           {now} + make_interval(secs => %(expires_in)s::float8), %(partition_key)s::text
    FROM unnest(%(payloads)b::bytea[]) AS p
    RETURNING id
), woken AS MATERIALIZED (
    SELECT pg_notify(%(queue)s::text, '') WHERE %(wake)s::boolean
)
SELECT id FROM inserted WHERE (SELECT count(*) FROM woken) >= 0;

-- name: insert_jobs_fair
-- insert_jobs of a partition key: the same rows, and the key's cursor if the
-- queue is fair (core/fair.py). A separate statement so a plain enqueue
-- touches no table but alk_jobs (a producer role needs no more grants).
-- One row per payload, in array order (nextval runs in the order unnest yields
-- rows, so ids ascend with the payloads). The stamps are shared scalars;
-- run_at and expires_at resolve against this statement's now().
WITH inserted AS (
    INSERT INTO {schema}.alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                                   visibility_timeout_s, retry_base_s, expires_at, partition_key)
    SELECT %(queue)s::text, p, %(priority)s::integer,
           COALESCE(%(run_at)s::timestamptz, {now} + make_interval(secs => %(delay)s::float8)),
           {now}, %(max_attempts)s::integer, %(visibility)s::float8, %(retry_base)s::float8,
           {now} + make_interval(secs => %(expires_in)s::float8), %(partition_key)s::text
    FROM unnest(%(payloads)b::bytea[]) AS p
    RETURNING id
), touched AS (
    -- a fair queue's key cursor for this batch's partition key (core/fair.py): a
    -- new key starts at the queue's smallest vtime. DO UPDATE (a no-op) takes the
    -- cursor's row lock, so a claim dropping the cursor as empty at this moment is
    -- waited for, and the cursor is inserted again after it.
    INSERT INTO {schema}.alk_fair AS c (queue, partition_key, vtime)
    SELECT %(queue)s::text, %(partition_key)s::text,
           COALESCE((SELECT min(vtime) FROM {schema}.alk_fair WHERE queue = %(queue)s), 0)
    WHERE %(partition_key)s::text IS NOT NULL
      AND EXISTS (SELECT 1 FROM {schema}.alk_queues WHERE queue = %(queue)s AND fair)
    ON CONFLICT (queue, partition_key) DO UPDATE SET vtime = c.vtime WHERE false
), woken AS MATERIALIZED (
    SELECT pg_notify(%(queue)s::text, '') WHERE %(wake)s::boolean  -- as in insert_jobs
)
SELECT id FROM inserted WHERE (SELECT count(*) FROM woken) >= 0;

-- name: insert_keyed_jobs
-- insert_jobs with a dedupe key per row (NULL: none): the unique index
-- alk_jobs_dedupe makes a row whose key a live job holds do nothing; a
-- concurrent insert of the same key waits for the other transaction and then
-- does nothing (or inserts, if that one rolled back). RETURNING says which got in.
INSERT INTO {schema}.alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                               visibility_timeout_s, retry_base_s, expires_at, partition_key,
                               dedupe_key)
SELECT %(queue)s::text, u.p, %(priority)s::integer,
       COALESCE(%(run_at)s::timestamptz, {now} + make_interval(secs => %(delay)s::float8)),
       {now}, %(max_attempts)s::integer, %(visibility)s::float8, %(retry_base)s::float8,
       {now} + make_interval(secs => %(expires_in)s::float8), %(partition_key)s::text, u.k
FROM unnest(%(payloads)b::bytea[], %(keys)s::text[]) WITH ORDINALITY AS u(p, k, n)
ORDER BY u.n
ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
RETURNING id, dedupe_key;

-- name: insert_keyed_jobs_fair
-- insert_keyed_jobs of a partition key: the same rows, and the key's cursor if the
-- queue is fair (core/fair.py). A separate statement so a plain enqueue
-- touches no table but alk_jobs (a producer role needs no more grants).
-- insert_jobs with a dedupe key per row (NULL: none): the unique index
-- alk_jobs_dedupe makes a row whose key a live job holds do nothing; a
-- concurrent insert of the same key waits for the other transaction and then
-- does nothing (or inserts, if that one rolled back). RETURNING says which got in.
WITH inserted AS (
    INSERT INTO {schema}.alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                                   visibility_timeout_s, retry_base_s, expires_at, partition_key,
                                   dedupe_key)
    SELECT %(queue)s::text, u.p, %(priority)s::integer,
           COALESCE(%(run_at)s::timestamptz, {now} + make_interval(secs => %(delay)s::float8)),
           {now}, %(max_attempts)s::integer, %(visibility)s::float8, %(retry_base)s::float8,
           {now} + make_interval(secs => %(expires_in)s::float8), %(partition_key)s::text, u.k
    FROM unnest(%(payloads)b::bytea[], %(keys)s::text[]) WITH ORDINALITY AS u(p, k, n)
    ORDER BY u.n
    ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
    RETURNING id, dedupe_key
), touched AS (
    -- a fair queue's key cursor for this batch's partition key (core/fair.py): a
    -- new key starts at the queue's smallest vtime. DO UPDATE (a no-op) takes the
    -- cursor's row lock, so a claim dropping the cursor as empty at this moment is
    -- waited for, and the cursor is inserted again after it.
    INSERT INTO {schema}.alk_fair AS c (queue, partition_key, vtime)
    SELECT %(queue)s::text, %(partition_key)s::text,
           COALESCE((SELECT min(vtime) FROM {schema}.alk_fair WHERE queue = %(queue)s), 0)
    WHERE %(partition_key)s::text IS NOT NULL
      AND EXISTS (SELECT 1 FROM {schema}.alk_queues WHERE queue = %(queue)s AND fair)
    ON CONFLICT (queue, partition_key) DO UPDATE SET vtime = c.vtime WHERE false
)
SELECT id, dedupe_key FROM inserted;

-- name: insert_debounced
-- One pending job per debounce key (alk_jobs_debounce, over pending rows only):
-- a new key inserts; a key a pending job holds replaces that job's payload and,
-- with :debounce, pushes its run_at to now + :debounce. A job claimed meanwhile
-- is not changed: the upsert waits for the claim's row lock, finds the row no
-- longer pending (out of the index) and inserts the next job instead.
-- RETURNING says which (xmax is set on a row this statement updated).
WITH upserted AS (
    INSERT INTO {schema}.alk_jobs AS j (queue, payload, priority, run_at, created_at,
                                        max_attempts, visibility_timeout_s, retry_base_s,
                                        expires_at, partition_key, debounce_key)
    VALUES (%(queue)s::text, %(payload)b::bytea, %(priority)s::integer,
            COALESCE(%(run_at)s::timestamptz, {now} + make_interval(secs => %(delay)s::float8)),
            {now}, %(max_attempts)s::integer, %(visibility)s::float8, %(retry_base)s::float8,
            {now} + make_interval(secs => %(expires_in)s::float8), %(partition_key)s::text,
            %(key)s::text)
    ON CONFLICT (queue, debounce_key) WHERE state = 'pending' AND debounce_key IS NOT NULL
    DO UPDATE SET payload = excluded.payload,
                  run_at = CASE WHEN %(push)s THEN excluded.run_at ELSE j.run_at END
    RETURNING j.id, j.xmax <> 0 AS replaced
)
SELECT id, replaced FROM upserted;

-- name: insert_debounced_fair
-- insert_debounced of a partition key, keeping a fair queue's key cursor.
-- One pending job per debounce key (alk_jobs_debounce, over pending rows only):
-- a new key inserts; a key a pending job holds replaces that job's payload and,
-- with :debounce, pushes its run_at to now + :debounce. A job claimed meanwhile
-- is not changed: the upsert waits for the claim's row lock, finds the row no
-- longer pending (out of the index) and inserts the next job instead.
-- RETURNING says which (xmax is set on a row this statement updated).
WITH upserted AS (
    INSERT INTO {schema}.alk_jobs AS j (queue, payload, priority, run_at, created_at,
                                        max_attempts, visibility_timeout_s, retry_base_s,
                                        expires_at, partition_key, debounce_key)
    VALUES (%(queue)s::text, %(payload)b::bytea, %(priority)s::integer,
            COALESCE(%(run_at)s::timestamptz, {now} + make_interval(secs => %(delay)s::float8)),
            {now}, %(max_attempts)s::integer, %(visibility)s::float8, %(retry_base)s::float8,
            {now} + make_interval(secs => %(expires_in)s::float8), %(partition_key)s::text,
            %(key)s::text)
    ON CONFLICT (queue, debounce_key) WHERE state = 'pending' AND debounce_key IS NOT NULL
    DO UPDATE SET payload = excluded.payload,
                  run_at = CASE WHEN %(push)s THEN excluded.run_at ELSE j.run_at END
    RETURNING j.id, j.xmax <> 0 AS replaced
), touched AS (
    -- a fair queue's key cursor for this batch's partition key (core/fair.py): a
    -- new key starts at the queue's smallest vtime. DO UPDATE (a no-op) takes the
    -- cursor's row lock, so a claim dropping the cursor as empty at this moment is
    -- waited for, and the cursor is inserted again after it.
    INSERT INTO {schema}.alk_fair AS c (queue, partition_key, vtime)
    SELECT %(queue)s::text, %(partition_key)s::text,
           COALESCE((SELECT min(vtime) FROM {schema}.alk_fair WHERE queue = %(queue)s), 0)
    WHERE %(partition_key)s::text IS NOT NULL
      AND EXISTS (SELECT 1 FROM {schema}.alk_queues WHERE queue = %(queue)s AND fair)
    ON CONFLICT (queue, partition_key) DO UPDATE SET vtime = c.vtime WHERE false
)
SELECT id, replaced FROM upserted;

-- name: live_keys
SELECT dedupe_key, id FROM {schema}.alk_jobs
WHERE queue = %(queue)s AND dedupe_key = ANY(%(keys)s::text[]);

-- name: take_windows
-- Take each key's dedupe window unless an unexpired one holds it; a concurrent
-- taker of the same key waits for the row lock, then re-checks the WHERE on
-- the committed row (and gets nothing back: the window is held).
INSERT INTO {schema}.alk_dedupe AS d (queue, dedupe_key, job_id, expires_at)
SELECT %(queue)s::text, k, 0, {now} + make_interval(secs => %(window_s)s::float8)
FROM unnest(%(keys)s::text[]) AS k
ON CONFLICT (queue, dedupe_key) DO UPDATE SET job_id = 0, expires_at = EXCLUDED.expires_at
WHERE d.expires_at <= {now}
RETURNING dedupe_key;

-- name: window_jobs
SELECT dedupe_key, job_id FROM {schema}.alk_dedupe
WHERE queue = %(queue)s AND dedupe_key = ANY(%(keys)s::text[]);

-- name: set_window_jobs
UPDATE {schema}.alk_dedupe AS d SET job_id = u.id
FROM unnest(%(keys)s::text[], %(ids)s::bigint[]) AS u(k, id)
WHERE d.queue = %(queue)s AND d.dedupe_key = u.k;

-- fragment: claim_update
-- The UPDATE of `claim` and `claim_lean`: the rows of `chosen` become this
-- worker's claims, returned as the engine decodes a claimed job. The rows are
-- named by their ids as an array (one primary-key probe each), not joined: a
-- join is planned from the table's statistics, and a job table last analyzed
-- nearly empty (a queue's usual state) and filled since looked like one row,
-- so the planner walked the whole table once per chosen row (1.2 s per claim
-- of 500 at 20,000 queued; docs/postgres.md, "Plans that do not trust the
-- statistics"). The other statements that update or delete rows picked by a
-- CTE name them the same way, or beside the join (the acks' join stays:
-- there an array made the fresh-store plan worse).
UPDATE {schema}.alk_jobs AS j
SET state = 'processing',
    attempts = j.attempts + 1,
    worker_id = %(worker)s,
    claim_expires_at = {now} + make_interval(secs => j.visibility_timeout_s)
WHERE j.id = ANY(ARRAY(SELECT id FROM chosen))
RETURNING j.id, j.queue, j.payload, j.state, j.priority, date_part('epoch', j.run_at),
          date_part('epoch', j.created_at), j.attempts, j.max_attempts,
          j.visibility_timeout_s, j.retry_base_s, date_part('epoch', j.expires_at),
          j.worker_id, date_part('epoch', j.claim_expires_at), j.last_error,
          NULL::float8 AS died_at, j.dedupe_key, j.partition_key

-- name: claim
-- The pre-claim exhausted sweep and the claim, one statement (one transaction):
--   swept/buried: lapsed claims with no attempts left move to dead;
--   pending/lapsed: the two claimable arms, each walking its own partial index
--     in claim order and locking with SKIP LOCKED (a row another claimer holds
--     is passed over, never waited for);
--   chosen: the best :n of both arms.
-- Every CTE is MATERIALIZED: the pick runs exactly once, so the UPDATE can
-- never see a re-run subquery hand back more than :n rows (the known trap of
-- `id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)`). The arms are disjoint
-- from the swept rows (attempts < max_attempts vs >=), so no row is touched twice.
-- RETURNING order is not guaranteed: the engine sorts the rows in claim order.
-- Times come back as POSIX seconds (float8: exact to the microsecond, which
-- Job turns into the same UTC datetimes on access): a float costs the client
-- a fraction of a binary timestamptz's decoding per column, and the claim is
-- the per-job hot path (a worker's handler reads its job's times rarely).
-- gate: the queue's settings row, if any. A paused queue claims nothing; a
-- limited or fair one claims nothing here when :gated (the fast path) and
-- returns one marker row (id NULL, state 'limited', or 'fair' for a fair queue
-- without limits) telling the engine to take the flow's path (claim_locked).
-- An uncorrelated condition, so a one-time filter.
-- The claim waits for its WAL flush (the server's synchronous_commit): a claim
-- lost in a server crash would hand the same attempt number, the fence, to a
-- second claimant while the first, on another host, still holds it.
WITH gate AS MATERIALIZED (
    SELECT paused, (concurrency IS NOT NULL OR partition_concurrency IS NOT NULL
                    OR rate_count IS NOT NULL) AS limited, fair
    FROM {schema}.alk_queues WHERE queue = %(queue)s
), open AS MATERIALIZED (
    SELECT NOT EXISTS (SELECT 1 FROM gate WHERE paused OR ((limited OR fair) AND %(gated)s)) AS ok
), swept AS (
    DELETE FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND state = 'processing' AND claim_expires_at < {now}
      AND attempts >= max_attempts
    RETURNING *
), buried AS (
    INSERT INTO {schema}.alk_dead (id, queue, payload, priority, run_at, created_at, attempts,
                                   max_attempts, visibility_timeout_s, retry_base_s, expires_at,
                                   worker_id, claim_expires_at, last_error, died_at, dedupe_key,
                                   partition_key)
    SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           %(exhausted_error)s::text, {now}, dedupe_key, partition_key
    FROM swept
), pending AS MATERIALIZED (
    SELECT id, priority, run_at FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND state = 'pending' AND run_at <= {now}
      AND (expires_at IS NULL OR expires_at > {now}) AND (SELECT ok FROM open)
    ORDER BY priority DESC, run_at, id
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), lapsed AS MATERIALIZED (
    SELECT id, priority, run_at FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND state = 'processing' AND claim_expires_at < {now}
      AND attempts < max_attempts AND (expires_at IS NULL OR expires_at > {now})
      AND (SELECT ok FROM open)
    ORDER BY priority DESC, run_at, id
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), chosen AS MATERIALIZED (
    SELECT id FROM (SELECT * FROM pending UNION ALL SELECT * FROM lapsed) AS arms
    ORDER BY priority DESC, run_at, id
    LIMIT %(n)s
), claimed AS (
    {claim_update}
), announced AS MATERIALIZED (
    -- a lapsed claim taken over: tell the worker still holding it (delivered at commit)
    SELECT pg_notify(%(queue)s, 'reclaimed:' || c.id || ':' || c.attempts)
    FROM claimed AS c JOIN lapsed AS l ON l.id = c.id
)
SELECT * FROM claimed WHERE (SELECT count(*) FROM announced) >= 0
UNION ALL
SELECT NULL::bigint, NULL::text, NULL::bytea,
       CASE WHEN limited THEN 'limited' ELSE 'fair' END, NULL::integer,
       NULL::float8, NULL::float8, NULL::integer, NULL::integer, NULL::float8,
       NULL::float8, NULL::float8, NULL::text, NULL::float8, NULL::text,
       NULL::float8, NULL::text, NULL::text
FROM gate WHERE (limited OR fair) AND NOT paused AND %(gated)s;

-- name: claim_lean
-- The claim when nothing can be in its way: no settings row that stops or gates
-- the queue (paused; limited or fair when :gated) and no lapsed claim of the
-- queue that `claim`'s arms would take over or bury (state processing,
-- claim_expires_at below now, and exhausted or not expired: exactly the rows of
-- its swept and lapsed arms). Then `claim` would claim the pending arm's best
-- :n and nothing else, which this does with no arm, sort or notes of its own
-- (in a wake, ~0.1 ms less server time per claim measured by
-- bench/claim_in_wake.py). Otherwise it claims nothing and returns one marker
-- row (id NULL; state 'gated' when the settings row is in the way, else
-- 'lapsed'): the engine runs `claim`, which decides as before (and claims a
-- gated queue with `claim` from then on, until it claims plainly again).
-- Both checks read the statement's snapshot at its now: a claim lapses by the
-- clock, not by a commit, so `claim` run instead would have seen the same
-- lapsed rows (a row another session holds locked only sends it to `claim`,
-- which skips it). `chosen` is MATERIALIZED, as in
-- `claim`: the pick runs once, the UPDATE never sees more than :n rows.
-- The claim waits for its WAL flush, as `claim` does.
WITH open AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM {schema}.alk_queues
                   WHERE queue = %(queue)s
                     AND (paused OR ((concurrency IS NOT NULL
                                      OR partition_concurrency IS NOT NULL
                                      OR rate_count IS NOT NULL OR fair)
                                     AND %(gated)s))) AS gate,
           EXISTS (SELECT 1 FROM {schema}.alk_jobs
                   WHERE queue = %(queue)s AND state = 'processing'
                     AND claim_expires_at < {now}
                     AND (attempts >= max_attempts OR expires_at IS NULL
                          OR expires_at > {now})) AS lapsed
), chosen AS MATERIALIZED (
    SELECT id FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND state = 'pending' AND run_at <= {now}
      AND (expires_at IS NULL OR expires_at > {now})
      AND (SELECT NOT (gate OR lapsed) FROM open)
    ORDER BY priority DESC, run_at, id
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), claimed AS (
    {claim_update}
)
SELECT * FROM claimed
UNION ALL
SELECT NULL::bigint, NULL::text, NULL::bytea, CASE WHEN gate THEN 'gated' ELSE 'lapsed' END,
       NULL::integer, NULL::float8, NULL::float8, NULL::integer, NULL::integer, NULL::float8,
       NULL::float8, NULL::float8, NULL::text, NULL::float8, NULL::text,
       NULL::float8, NULL::text, NULL::text
FROM open WHERE gate OR lapsed;

-- name: lock_settings
-- The locked path of a limited queue, step 1 (inside a transaction): the
-- settings row FOR UPDATE, so this queue's claims run one at a time; the
-- statements after it see every claim committed before the lock was granted.
SELECT queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat,
       fair, aging_s, EXTRACT(EPOCH FROM {now})::float8
FROM {schema}.alk_queues WHERE queue = %(queue)s
FOR UPDATE;

-- name: count_running
-- Unexpired claims of a queue (a lapsed claim no longer holds a slot).
SELECT count(*) FROM {schema}.alk_jobs
WHERE queue = %(queue)s AND state = 'processing' AND claim_expires_at >= {now};

-- name: running_partitions
SELECT partition_key, count(*) FROM {schema}.alk_jobs
WHERE queue = %(queue)s AND state = 'processing' AND partition_key IS NOT NULL
  AND claim_expires_at >= {now}
GROUP BY partition_key;

-- name: claim_candidates
-- A partition-limited claim's candidates in claim order with their partition
-- keys (core/flow.py picks those whose partition has room). No SKIP LOCKED
-- needed: the settings row lock makes this the queue's only claimer.
SELECT id, partition_key FROM (
    (SELECT id, priority, run_at, partition_key FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND state = 'pending' AND run_at <= {now}
       AND (expires_at IS NULL OR expires_at > {now})
     ORDER BY priority DESC, run_at, id LIMIT %(window)s)
    UNION ALL
    (SELECT id, priority, run_at, partition_key FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND state = 'processing' AND claim_expires_at < {now}
       AND attempts < max_attempts AND (expires_at IS NULL OR expires_at > {now})
     ORDER BY priority DESC, run_at, id LIMIT %(window)s)
) AS arms
ORDER BY priority DESC, run_at, id
LIMIT %(window)s;

-- name: claim_ids
-- Claim the listed candidates, re-checked as claimable (the pre-claim sweep
-- ran in the claim statement of this same transaction or is not needed); a
-- lapsed claim taken over is announced to the worker still holding it, as in
-- `claim` (delivered at commit).
WITH picked AS MATERIALIZED (
    SELECT id, state AS was FROM {schema}.alk_jobs
    WHERE id = ANY(%(ids)s::bigint[]) AND queue = %(queue)s
      AND (state = 'pending' OR (claim_expires_at < {now} AND attempts < max_attempts))
    FOR UPDATE
), claimed AS (
    UPDATE {schema}.alk_jobs AS j
    SET state = 'processing',
        attempts = j.attempts + 1,
        worker_id = %(worker)s,
        claim_expires_at = {now} + make_interval(secs => j.visibility_timeout_s)
    FROM picked
    WHERE j.id = picked.id AND j.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.queue, j.payload, j.state, j.priority, j.run_at, j.created_at,
              j.attempts, j.max_attempts, j.visibility_timeout_s, j.retry_base_s,
              j.expires_at, j.worker_id, j.claim_expires_at, j.last_error,
              NULL::timestamptz AS died_at, j.dedupe_key, j.partition_key, picked.was
), announced AS MATERIALIZED (
    SELECT pg_notify(%(queue)s, 'reclaimed:' || c.id || ':' || c.attempts)
    FROM claimed AS c WHERE c.was = 'processing'
)
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM claimed WHERE (SELECT count(*) FROM announced) >= 0;

-- name: set_tat
UPDATE {schema}.alk_queues SET tat = %(tat)s::float8 WHERE queue = %(queue)s;

-- name: fair_cursors
-- A fair claim, step 1 (core/fair.py): the :window key cursors of smallest
-- vtime, walked in alk_fair_order and locked; a cursor another claim (or an
-- enqueue touching it) holds is passed over, so two claims never serve one key.
SELECT c.partition_key, c.vtime, COALESCE(w.weight, 1.0)
FROM {schema}.alk_fair AS c
LEFT JOIN {schema}.alk_fair_weights AS w
       ON w.queue = c.queue AND w.partition_key = c.partition_key
WHERE c.queue = %(queue)s
ORDER BY c.vtime, c.partition_key
LIMIT %(window)s
FOR UPDATE OF c SKIP LOCKED;

-- name: fair_cursors_wait
-- fair_cursors when it found every cursor locked: the :window keys of smallest
-- vtime (read unlocked), then locked waiting for the claims holding them (a few
-- keys, all being served: a short wait keeps the turns fair). Locked in key
-- order, which no claim changes (vtime does), so waiters never deadlock; a
-- SKIP LOCKED claimer never waits on a cursor.
SELECT c.partition_key, c.vtime, COALESCE(w.weight, 1.0)
FROM {schema}.alk_fair AS c
LEFT JOIN {schema}.alk_fair_weights AS w
       ON w.queue = c.queue AND w.partition_key = c.partition_key
WHERE c.queue = %(queue)s
  AND c.partition_key IN (SELECT f.partition_key FROM {schema}.alk_fair AS f
                          WHERE f.queue = %(queue)s
                          ORDER BY f.vtime, f.partition_key LIMIT %(window)s)
ORDER BY c.partition_key
FOR UPDATE OF c;

-- name: fair_heads
-- A fair claim, step 2: per key, its best :limits[i] claimable jobs (one probe
-- of alk_jobs_fair, one of alk_jobs_partition for lapsed claims); a key with
-- none gives one row with id NULL and whether it still has live jobs.
SELECT k.key, h.id,
       h.id IS NULL AND (
           EXISTS (SELECT 1 FROM {schema}.alk_jobs AS j
                   WHERE j.queue = %(queue)s AND j.partition_key = k.key
                     AND j.state = 'pending')
           OR EXISTS (SELECT 1 FROM {schema}.alk_jobs AS j
                      WHERE j.queue = %(queue)s AND j.partition_key = k.key
                        AND j.state = 'processing'))
FROM unnest(%(keys)s::text[], %(limits)s::integer[]) WITH ORDINALITY AS k(key, lim, ord)
LEFT JOIN LATERAL (
    SELECT arms.id, arms.priority, arms.run_at FROM (
        (SELECT id, priority, run_at FROM {schema}.alk_jobs
         WHERE queue = %(queue)s AND partition_key = k.key AND state = 'pending'
           AND run_at <= {now} AND (expires_at IS NULL OR expires_at > {now})
         ORDER BY priority DESC, run_at, id LIMIT k.lim)
        UNION ALL
        (SELECT id, priority, run_at FROM {schema}.alk_jobs
         WHERE queue = %(queue)s AND partition_key = k.key AND state = 'processing'
           AND claim_expires_at < {now} AND attempts < max_attempts
           AND (expires_at IS NULL OR expires_at > {now})
         ORDER BY priority DESC, run_at, id LIMIT k.lim)
    ) AS arms
    ORDER BY arms.priority DESC, arms.run_at, arms.id
    LIMIT k.lim
) AS h ON true
ORDER BY k.ord, h.priority DESC, h.run_at, h.id;

-- name: fair_update
-- A fair claim, last step: the served keys' new vtime, and the cursors of keys
-- without live jobs dropped (this claim holds their locks since fair_cursors).
WITH moved AS (
    UPDATE {schema}.alk_fair AS c SET vtime = u.v
    FROM unnest(%(keys)s::text[], %(vtimes)s::float8[]) AS u(k, v)
    WHERE c.queue = %(queue)s AND c.partition_key = u.k
    RETURNING 1
), dropped AS (
    DELETE FROM {schema}.alk_fair AS c
    WHERE c.queue = %(queue)s AND c.partition_key = ANY(%(pruned)s::text[])
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM dropped);

-- name: fair_claim
-- A fair queue's claim without limits in one statement (core/fair.py states the
-- rule; this is the same order, step for step):
--   gate/open, swept/buried: as in `claim` (the pre-claim sweep); a queue that
--     is not fair, or is paused or limited, claims nothing here and gets one
--     marker row (id NULL, state 'regate'): the engine takes `claim` instead;
--   cur: the :window key cursors of smallest vtime, locked SKIP LOCKED (two
--     claims never serve one key);
--   keyed: those whose vtime is still what this statement's snapshot saw (a
--     cursor another claim moved after the snapshot was taken has stale heads
--     here: it is left alone, as if locked), with weight and rank;
--   fresh: the keys to probe and how deep, head_limits(): each key's share of
--     the :n + :spare smallest finish tags (about one key per job claimed);
--   heads: per key probed, its best `lim` claimable jobs (one probe of
--     alk_jobs_fair; one of alk_jobs_partition for lapsed claims only if the
--     queue has any, `lapsing`), each with its finish tag vtime + j / weight;
--   chosen/picked: the :n smallest (tag, rank, id), locked SKIP LOCKED and
--     re-checked as claimable;
--   quiet: keys without heads, and whether they still have live jobs;
--   more_*: the rest of :n in the queue's plain order;
--   moved: each served key's vtime + claimed / weight; an idle key (live, none
--     due) moves up to the largest tag claimed.
-- busy: no cursor could be taken but some exist (every key being served):
-- nothing is claimed and a marker row (id NULL, state 'busy') says so; with
-- :waited (the engine took the cursors waiting) never. A key found without
-- live jobs is not dropped here (this snapshot predates the cursor lock, so an
-- enqueue committed in between would be missed): a marker row (state 'empty',
-- the key in its partition_key column, the last) asks for fair_prune.
WITH gate AS MATERIALIZED (
    SELECT paused, (concurrency IS NOT NULL OR partition_concurrency IS NOT NULL
                    OR rate_count IS NOT NULL) AS limited, fair
    FROM {schema}.alk_queues WHERE queue = %(queue)s
), open AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM gate WHERE fair AND NOT paused AND NOT limited) AS ok
), swept AS (
    DELETE FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND state = 'processing' AND claim_expires_at < {now}
      AND attempts >= max_attempts
    RETURNING *
), buried AS (
    INSERT INTO {schema}.alk_dead (id, queue, payload, priority, run_at, created_at, attempts,
                                   max_attempts, visibility_timeout_s, retry_base_s, expires_at,
                                   worker_id, claim_expires_at, last_error, died_at, dedupe_key,
                                   partition_key)
    SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           %(exhausted_error)s::text, {now}, dedupe_key, partition_key
    FROM swept
), cur AS MATERIALIZED (
    SELECT c.partition_key AS key, c.vtime
    FROM {schema}.alk_fair AS c
    WHERE c.queue = %(queue)s AND (SELECT ok FROM open)
    ORDER BY c.vtime, c.partition_key
    LIMIT %(window)s
    FOR UPDATE SKIP LOCKED
), keyed AS MATERIALIZED (
    SELECT cur.key, cur.vtime, COALESCE(w.weight, 1.0) AS weight,
           row_number() OVER (ORDER BY cur.vtime, cur.key) AS rank
    FROM cur
    LEFT JOIN {schema}.alk_fair_weights AS w
           ON w.queue = %(queue)s AND w.partition_key = cur.key
    WHERE cur.vtime = (SELECT s.vtime FROM {schema}.alk_fair AS s  -- as the snapshot saw it
                       WHERE s.queue = %(queue)s AND s.partition_key = cur.key)
), reach AS MATERIALIZED (
    -- a bound on the :n + :spare smallest finish tags: that many keys' first tags
    -- are no larger than the (:n + :spare)-th smallest first tag (NULL: fewer keys)
    SELECT (SELECT k.vtime + 1.0 / k.weight FROM keyed AS k
            ORDER BY k.vtime + 1.0 / k.weight
            OFFSET %(n)s::integer + %(spare)s::integer - 1 LIMIT 1) AS tag
), fresh AS MATERIALIZED (
    -- head_limits(): each key's count of the :n + :spare smallest finish tags, as
    -- if every key had jobs enough (at most :n); a key without one is not probed.
    -- Each key's tags are generated only up to the bound (one past it, for
    -- rounding): a claim of n sorts about 2 tags per key, not n + spare
    SELECT k.*, s.lim FROM keyed AS k JOIN (
        SELECT t.key, LEAST(count(*), %(n)s)::integer AS lim FROM (
            SELECT k.key FROM keyed AS k CROSS JOIN reach AS r
            CROSS JOIN LATERAL generate_series(
                1, LEAST((%(n)s::integer + %(spare)s::integer)::float8,
                         COALESCE(floor((r.tag - k.vtime) * k.weight) + 1,
                                  %(n)s::integer + %(spare)s::integer))::integer) AS g(j)
            ORDER BY k.vtime + g.j::float8 / k.weight, k.rank
            LIMIT %(n)s::integer + %(spare)s::integer
        ) AS t GROUP BY t.key
    ) AS s ON s.key = k.key
), busy AS MATERIALIZED (
    SELECT NOT %(waited)s AND (SELECT ok FROM open) AND NOT EXISTS (SELECT 1 FROM keyed)
           AND EXISTS (SELECT 1 FROM {schema}.alk_fair WHERE queue = %(queue)s) AS b
), lapsing AS MATERIALIZED (
    -- whether the queue has any lapsed claim to take over (one probe of
    -- alk_jobs_processing, usually empty): only then is any key's lapsed arm read
    SELECT EXISTS (SELECT 1 FROM {schema}.alk_jobs
                   WHERE queue = %(queue)s AND state = 'processing' AND claim_expires_at < {now}
                     AND attempts < max_attempts) AS found
), heads AS MATERIALIZED (
    SELECT f.key, f.rank, h.id, f.vtime + h.j::float8 / f.weight AS tag
    FROM fresh AS f
    CROSS JOIN LATERAL (
        SELECT arms.id,
               row_number() OVER (ORDER BY arms.priority DESC, arms.run_at, arms.id) AS j
        FROM (
            (SELECT id, priority, run_at FROM {schema}.alk_jobs
             WHERE queue = %(queue)s AND partition_key = f.key AND state = 'pending'
               AND run_at <= {now} AND (expires_at IS NULL OR expires_at > {now})
             ORDER BY priority DESC, run_at, id LIMIT f.lim)
            UNION ALL
            (SELECT id, priority, run_at FROM {schema}.alk_jobs
             WHERE queue = %(queue)s AND partition_key = f.key AND state = 'processing'
               AND claim_expires_at < {now} AND attempts < max_attempts
               AND (expires_at IS NULL OR expires_at > {now}) AND (SELECT found FROM lapsing)
             ORDER BY priority DESC, run_at, id LIMIT f.lim)
        ) AS arms
        ORDER BY arms.priority DESC, arms.run_at, arms.id
        LIMIT f.lim
    ) AS h
), chosen AS MATERIALIZED (
    SELECT key, id, tag FROM heads ORDER BY tag, rank, id LIMIT %(n)s
), picked AS MATERIALIZED (
    -- a primary-key probe per chosen head, whatever the statistics say (a join
    -- of the two was planned as a walk of alk_jobs per head when the table had
    -- been analyzed empty)
    SELECT j.id, j.was, ch.key, ch.tag
    FROM chosen AS ch CROSS JOIN LATERAL (
        SELECT id, state AS was FROM {schema}.alk_jobs
        WHERE id = ch.id AND queue = %(queue)s
          AND (state = 'pending' OR (claim_expires_at < {now} AND attempts < max_attempts))
        FOR UPDATE SKIP LOCKED
    ) AS j
), quiet AS MATERIALIZED (
    SELECT f.key, f.vtime,
           EXISTS (SELECT 1 FROM {schema}.alk_jobs AS j
                   WHERE j.queue = %(queue)s AND j.partition_key = f.key AND j.state = 'pending')
           OR EXISTS (SELECT 1 FROM {schema}.alk_jobs AS j
                      WHERE j.queue = %(queue)s AND j.partition_key = f.key
                        AND j.state = 'processing') AS live
    FROM fresh AS f WHERE NOT EXISTS (SELECT 1 FROM heads AS h WHERE h.key = f.key)
), rest AS MATERIALIZED (
    SELECT CASE WHEN (SELECT b FROM busy) OR NOT (SELECT ok FROM open) THEN 0
                ELSE %(n)s - (SELECT count(*) FROM picked) END AS k
), more_pending AS MATERIALIZED (
    SELECT id, priority, run_at FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND state = 'pending' AND run_at <= {now}
      AND (expires_at IS NULL OR expires_at > {now})
      AND id NOT IN (SELECT id FROM picked)
    ORDER BY priority DESC, run_at, id
    LIMIT (SELECT k FROM rest)
    FOR UPDATE SKIP LOCKED
), more_lapsed AS MATERIALIZED (
    SELECT id, priority, run_at FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND state = 'processing' AND claim_expires_at < {now}
      AND attempts < max_attempts AND (expires_at IS NULL OR expires_at > {now})
      AND id NOT IN (SELECT id FROM picked)
    ORDER BY priority DESC, run_at, id
    LIMIT (SELECT k FROM rest)
    FOR UPDATE SKIP LOCKED
), taken AS MATERIALIZED (
    SELECT id, was FROM picked
    UNION ALL
    SELECT id, was FROM (
        SELECT id, priority, run_at, 'pending' AS was FROM more_pending
        UNION ALL
        SELECT id, priority, run_at, 'processing' AS was FROM more_lapsed
        ORDER BY priority DESC, run_at, id
        LIMIT (SELECT k FROM rest)
    ) AS more
), moved AS (
    UPDATE {schema}.alk_fair AS c SET vtime = m.v
    FROM (
        SELECT f.key, f.vtime + count(*)::float8 / f.weight AS v
        FROM fresh AS f JOIN picked AS p ON p.key = f.key
        GROUP BY f.key, f.vtime, f.weight
        UNION ALL
        SELECT q.key, l.latest
        FROM quiet AS q, (SELECT max(tag) AS latest FROM picked) AS l
        WHERE q.live AND l.latest > q.vtime
    ) AS m
    WHERE c.queue = %(queue)s AND c.partition_key = m.key
    RETURNING 1
), claimed AS (
    UPDATE {schema}.alk_jobs AS j
    SET state = 'processing',
        attempts = j.attempts + 1,
        worker_id = %(worker)s,
        claim_expires_at = {now} + make_interval(secs => j.visibility_timeout_s)
    FROM taken
    WHERE j.id = taken.id AND j.id = ANY(ARRAY(SELECT id FROM taken))
    RETURNING j.id, j.queue, j.payload, j.state, j.priority, j.run_at, j.created_at,
              j.attempts, j.max_attempts, j.visibility_timeout_s, j.retry_base_s,
              j.expires_at, j.worker_id, j.claim_expires_at, j.last_error,
              NULL::timestamptz AS died_at, j.dedupe_key, j.partition_key, taken.was
), announced AS MATERIALIZED (
    -- a lapsed claim taken over: tell the worker still holding it (delivered at commit)
    SELECT pg_notify(%(queue)s, 'reclaimed:' || c.id || ':' || c.attempts)
    FROM claimed AS c WHERE c.was = 'processing'
)
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM claimed WHERE (SELECT count(*) FROM announced) + (SELECT count(*) FROM moved) >= 0
UNION ALL
SELECT NULL::bigint, NULL::text, NULL::bytea, q.marker,
       NULL::integer, NULL::timestamptz, NULL::timestamptz, NULL::integer, NULL::integer,
       NULL::float8, NULL::float8, NULL::timestamptz, NULL::text, NULL::timestamptz, NULL::text,
       NULL::timestamptz, NULL::text, q.key
FROM (SELECT 'busy' AS marker, NULL::text AS key FROM busy WHERE b
      UNION ALL
      SELECT 'regate', NULL FROM open WHERE NOT ok
      UNION ALL
      SELECT 'empty', key FROM quiet WHERE NOT live) AS q;

-- name: generic_plan
-- fair_claim's explicit transaction (taken only after fair_cursors_wait; the
-- usual claim takes generic_plan_here), first: plan it once per connection (its prepared
-- statement's generic plan) instead of at every call. Left to itself the server
-- keeps choosing custom plans for fair_claim, ~2 ms of planning per claim against
-- ~1.5 ms of execution; the generic plan walks the same indexes (the parameters
-- pick rows within them, not between them). LOCAL: the transaction's own setting.
SET LOCAL plan_cache_mode = force_generic_plan;

-- name: generic_plan_here
-- generic_plan for fair_claim's own (implicit) transaction: sent in one pipeline
-- right before it with no Sync between, so both run in the one transaction the
-- server opens for them and the setting ends with it, as SET LOCAL's would (no
-- BEGIN and COMMIT to send and wait for: ~0.75 ms a claim measured here).
-- set_config(..., true), as SET LOCAL outside BEGIN logs a WARNING every time.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);

-- name: unflushed_here
-- Sent before a bookkeeping delete in one pipeline with no Sync between (one
-- implicit transaction, as generic_plan_here's): its commit does not wait for the
-- WAL flush. Only for rows whose delete may be lost with a server crash: each has
-- its own purge (a stopping worker's registry row, hand-off row, old receipts).
SELECT set_config('synchronous_commit', 'off', true);

-- name: fair_statistics
-- Whether the planner has statistics for fair_claim's main tables (reltuples is
-- -1 until the first ANALYZE or VACUUM): only then is its generic plan used.
SELECT bool_and(c.reltuples >= 0)
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname IN ('alk_jobs', 'alk_fair');

-- name: fair_lock
-- fair_prune, step 1 (one transaction with step 2): the cursors of keys a fair
-- claim found without live jobs, locked SKIP LOCKED (a claim serving a key
-- holds it; an enqueue touching it holds it until it commits).
SELECT partition_key FROM {schema}.alk_fair
WHERE queue = %(queue)s AND partition_key = ANY(%(keys)s::text[])
FOR UPDATE SKIP LOCKED;

-- name: fair_prune
-- fair_prune, step 2: of the cursors locked in step 1, drop those whose key has
-- no live job. A statement of its own, so its snapshot sees every enqueue that
-- committed before the lock was granted (a later one waits for this one).
DELETE FROM {schema}.alk_fair AS c
WHERE c.queue = %(queue)s AND c.partition_key = ANY(%(keys)s::text[])
  AND NOT EXISTS (SELECT 1 FROM {schema}.alk_jobs AS j
                  WHERE j.queue = %(queue)s AND j.partition_key = c.partition_key
                    AND j.state IN ('pending', 'processing'));

-- name: set_fair
-- Fairness on or off, in a transaction after await_claims (no enqueue is in
-- flight while the cursors are seeded). On: a cursor for every key with live
-- jobs (one scan of the queue's rows, here and never in a claim), each at the
-- queue's smallest vtime. Off: the cursors go. Consumers are woken.
WITH upsert AS (
    INSERT INTO {schema}.alk_queues (queue, fair) VALUES (%(queue)s, %(fair)s)
    ON CONFLICT (queue) DO UPDATE SET fair = excluded.fair
    RETURNING queue, fair
), seeded AS (
    INSERT INTO {schema}.alk_fair (queue, partition_key, vtime)
    SELECT DISTINCT %(queue)s::text, j.partition_key,
           COALESCE((SELECT min(vtime) FROM {schema}.alk_fair WHERE queue = %(queue)s), 0)
    FROM {schema}.alk_jobs AS j
    WHERE j.queue = %(queue)s AND j.partition_key IS NOT NULL AND %(fair)s
    ON CONFLICT (queue, partition_key) DO NOTHING
    RETURNING 1
), cleared AS (
    DELETE FROM {schema}.alk_fair WHERE queue = %(queue)s AND NOT %(fair)s
    RETURNING 1
)
SELECT pg_notify(queue, '') FROM upsert
WHERE (SELECT count(*) FROM seeded) + (SELECT count(*) FROM cleared) >= 0;

-- name: clear_weights
-- set_weights, step 1 (one transaction with step 2): the old weights go.
DELETE FROM {schema}.alk_fair_weights WHERE queue = %(queue)s;

-- name: add_weights
-- set_weights, step 2: the new ones (a key without a row weighs 1).
INSERT INTO {schema}.alk_fair_weights (queue, partition_key, weight)
SELECT %(queue)s::text, k, w FROM unnest(%(keys)s::text[], %(weights)s::float8[]) AS u(k, w);

-- name: set_aging
INSERT INTO {schema}.alk_queues (queue, aging_s) VALUES (%(queue)s, %(aging_s)s)
ON CONFLICT (queue) DO UPDATE SET aging_s = excluded.aging_s;

-- name: fair_weights
SELECT partition_key, weight FROM {schema}.alk_fair_weights
WHERE queue = %(queue)s ORDER BY partition_key;

-- name: queue_settings
SELECT queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat,
       fair, aging_s
FROM {schema}.alk_queues WHERE queue = %(queue)s;

-- name: all_queue_settings
SELECT queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat,
       fair, aging_s
FROM {schema}.alk_queues ORDER BY queue;

-- name: set_paused
-- Resume also wakes the queue's consumers (pg_notify: delivered at commit).
WITH upsert AS (
    INSERT INTO {schema}.alk_queues (queue, paused) VALUES (%(queue)s, %(paused)s)
    ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused
    RETURNING paused
)
SELECT pg_notify(%(queue)s, '') FROM upsert WHERE NOT paused;

-- name: await_claims
-- After a pause commits: wait (in a transaction of its own) until every
-- transaction writing alk_jobs when the pause committed has ended, so a claim
-- that began before the pause and did not see it is over before pause()
-- returns. SHARE ROW EXCLUSIVE conflicts with every writer's ROW EXCLUSIVE;
-- it is released at once, at the end of the transaction.
LOCK TABLE {schema}.alk_jobs IN SHARE ROW EXCLUSIVE MODE;

-- name: set_limits
-- New limits replace the old ones; the rate limiter starts afresh; consumers
-- held back by the old limits are woken.
WITH upsert AS (
    INSERT INTO {schema}.alk_queues (queue, concurrency, partition_concurrency, rate_count,
                                     rate_period_s, burst, tat)
    VALUES (%(queue)s, %(concurrency)s, %(partition_concurrency)s, %(rate_count)s,
            %(rate_period_s)s, %(burst)s, NULL)
    ON CONFLICT (queue) DO UPDATE
    SET concurrency = excluded.concurrency,
        partition_concurrency = excluded.partition_concurrency,
        rate_count = excluded.rate_count, rate_period_s = excluded.rate_period_s,
        burst = excluded.burst, tat = NULL
    RETURNING queue
)
SELECT pg_notify(queue, '') FROM upsert;

-- name: ack
-- Fenced delete: one DELETE under the fencing predicate (this queue,
-- processing, this claim's attempt count, deadline not passed). A row another
-- transaction holds (a racing reclaim, an earlier attempt of the same ack) is
-- waited for, then the predicate is re-checked on its newest version
-- (READ COMMITTED's EvalPlanQual), so a stale handle deletes nothing. No
-- separate `FOR UPDATE` first: the DELETE takes the same row lock itself, and
-- a lock before it cost a second WAL record and a second primary-key lookup
-- per job (issue #28). `state || ''` keeps the lookup on the primary key (see
-- ack_batch).
DELETE FROM {schema}.alk_jobs
WHERE id = %(id)s AND queue = %(queue)s AND (state || '') = 'processing'
  AND attempts = %(attempts)s AND claim_expires_at >= {now};

-- name: ack_many
-- The fenced delete of many claims at once (the store's group-committed
-- JobHandle.ack): one DELETE joined to the (queue, id, attempts) rows under
-- the same fencing predicate as `ack` (waits for a held row, re-checks on its
-- newest version); RETURNING says which made it. No `FOR UPDATE` pass first
-- (see `ack`): two batches can only contend for a row if both hold its fence,
-- and one attempt number is valid at a time, so the only overlap is a retry of
-- the same batch, which sends the same rows in the same order; a deadlock the
-- server would still find is an error the caller retries.
-- `state || ''` keeps it on the primary key (see ack_batch).
DELETE FROM {schema}.alk_jobs AS j
USING unnest(%(ids)b::bigint[], %(attempts)b::integer[], %(queues)b::text[])
      AS f(id, attempts, queue)
WHERE j.id = f.id AND j.queue = f.queue AND (j.state || '') = 'processing'
  AND j.attempts = f.attempts AND j.claim_expires_at >= {now}
RETURNING j.id, j.attempts;

-- name: ack_receipted
-- `ack_many` plus its receipt (docs/contract.md, "Ack receipts"), in one
-- statement: the fenced deletes, then the worker's receipt row upserted with
-- the ids of this batch that were not deleted. A retry of the batch (same
-- :token) intersects its refusals with the earlier attempts': an id any
-- attempt deleted drops out. ON CONFLICT DO UPDATE waits for and reads the
-- receipt row's newest committed version, so an earlier attempt still in
-- flight on a dead connection is seen once it commits (it holds the job rows'
-- locks until then, and the deletes here wait for them first). Returns the ids
-- no attempt of this batch deleted. The three columns come as array literals
-- ('{1,2}'; queue names quoted): built with one str.join, where a list of ints
-- costs psycopg's array dumper ~0.4 µs a job. The deletes are `ack_many`'s
-- single fenced DELETE (no `FOR UPDATE` pass first: see `ack` and `ack_many`).
WITH deleted AS (
    DELETE FROM {schema}.alk_jobs AS j
    USING unnest(%(ids)s::text::bigint[], %(attempts)s::text::integer[],
                 %(queues)s::text::text[]) AS f(id, attempts, queue)
    WHERE j.id = f.id AND j.queue = f.queue AND (j.state || '') = 'processing'
      AND j.attempts = f.attempts AND j.claim_expires_at >= {now}
    RETURNING j.id
), receipt AS (
    INSERT INTO {schema}.alk_ack_receipts AS r (owner, token, refused, at)
    SELECT %(owner)s::text, %(token)s::text,
           COALESCE(array_agg(f.id) FILTER (WHERE d.id IS NULL), '{}'), {now}
    FROM unnest(%(ids)s::text::bigint[]) AS f(id) LEFT JOIN deleted AS d ON d.id = f.id
    ON CONFLICT (owner) DO UPDATE SET
        refused = CASE WHEN r.token = excluded.token
            THEN ARRAY(SELECT unnest(r.refused) INTERSECT SELECT unnest(excluded.refused))
            ELSE excluded.refused END,
        token = excluded.token, at = excluded.at
    RETURNING r.refused
)
SELECT refused FROM receipt;

-- name: index_plan_here
-- Sent before ack_receipted in one pipeline with no Sync between (one implicit
-- transaction; the setting ends with it, as generic_plan_here's does): plan the
-- ack's join as a primary-key probe per acked row. Left to itself the planner
-- hashes a sequential scan of the whole job table per ack batch (it costs the
-- table small and 1,000 probes dear), a cost that grows with the backlog:
-- 2.6 ms of a 5.9 ms ack of 1,000 at 20,000 queued, ~10x that at 200,000.
-- `enable_seqscan` off leaves the probes the cheapest plan, custom or generic.
SELECT set_config('enable_seqscan', 'off', true);

-- name: drop_ack_receipts
-- A stopping worker's own receipt, and every receipt older than :older_s
-- seconds (of workers that died; a live worker's next batch writes its row again).
DELETE FROM {schema}.alk_ack_receipts
WHERE owner = %(owner)s OR at < {now} - make_interval(secs => %(older_s)s::float8);

-- name: ack_result
-- The fenced ack (see `ack`) plus the kept result, in one statement (one
-- transaction), and the result's note on the store's results channel, which
-- PostgreSQL delivers at that commit.
WITH fenced AS MATERIALIZED (
    SELECT id FROM {schema}.alk_jobs
    WHERE id = %(id)s AND queue = %(queue)s AND (state || '') = 'processing'
      AND attempts = %(attempts)s AND claim_expires_at >= {now}
    FOR UPDATE
), acked AS (
    DELETE FROM {schema}.alk_jobs AS j USING fenced WHERE j.id = fenced.id AND j.id = %(id)s
    RETURNING j.id, j.queue, j.attempts
), kept AS (
    INSERT INTO {schema}.alk_results (id, queue, outcome, value, attempts, finished_at,
                                      expires_at)
    SELECT id, queue, 'success', %(value)s::text, attempts, {now},
           {now} + make_interval(secs => %(keep)s::float8)
    FROM acked
    ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value, attempts = EXCLUDED.attempts,
        finished_at = EXCLUDED.finished_at, expires_at = EXCLUDED.expires_at
    RETURNING id
)
SELECT pg_notify(%(channel)s, id::text) FROM kept;

-- name: outcomes
-- What became of the listed jobs (of one queue, or any if :queue is NULL):
-- kept result, dead row or live row.
SELECT id, queue, outcome, value, NULL::text, attempts, finished_at FROM {schema}.alk_results
WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text) AND id = ANY(%(ids)s::bigint[])
UNION ALL
SELECT id, queue, 'dead', NULL, last_error, attempts, died_at FROM {schema}.alk_dead
WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text) AND id = ANY(%(ids)s::bigint[])
UNION ALL
SELECT id, queue, state, NULL, last_error, attempts, NULL FROM {schema}.alk_jobs
WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text) AND id = ANY(%(ids)s::bigint[]);

-- name: retry
-- Fenced: back to pending at now() + :delay with the caller's error; claimant
-- cleared. A claimed job has left its debounce key (a newer pending job may hold it).
WITH fenced AS MATERIALIZED (
    SELECT id FROM {schema}.alk_jobs
    WHERE id = %(id)s AND queue = %(queue)s AND (state || '') = 'processing'
      AND attempts = %(attempts)s AND claim_expires_at >= {now}
    FOR UPDATE
)
UPDATE {schema}.alk_jobs AS j
SET state = 'pending', run_at = {now} + make_interval(secs => %(delay)s::float8),
    last_error = %(error)s::text, worker_id = NULL, claim_expires_at = NULL,
    debounce_key = NULL
FROM fenced WHERE j.id = fenced.id AND j.id = %(id)s;

-- name: release
-- Fenced give-back with this attempt uncounted: a claim that never ran keeps
-- its place in line (:delay NULL), a snooze is due after :delay; last_error
-- kept; its debounce key dropped (as in retry).
WITH fenced AS MATERIALIZED (
    SELECT id FROM {schema}.alk_jobs
    WHERE id = %(id)s AND queue = %(queue)s AND (state || '') = 'processing'
      AND attempts = %(attempts)s AND claim_expires_at >= {now}
    FOR UPDATE
)
UPDATE {schema}.alk_jobs AS j
SET state = 'pending', attempts = j.attempts - 1,
    run_at = COALESCE({now} + make_interval(secs => %(delay)s::float8), j.run_at),
    worker_id = NULL, claim_expires_at = NULL, debounce_key = NULL
FROM fenced WHERE j.id = fenced.id AND j.id = %(id)s;

-- name: release_many
-- `release` of many claims of one queue in one statement (a stopping worker's
-- claim-ahead buffer): each (id, attempts) pair of the arrays under the same
-- fence, locked in id order, back to pending at its place in line with this
-- attempt uncounted and its debounce key dropped; RETURNING says which were.
WITH fenced AS MATERIALIZED (
    SELECT j.id FROM {schema}.alk_jobs AS j
    JOIN unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS f(id, attempts)
      ON j.id = f.id
    WHERE j.queue = %(queue)s AND (j.state || '') = 'processing'
      AND j.attempts = f.attempts AND j.claim_expires_at >= {now}
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE {schema}.alk_jobs AS j
SET state = 'pending', attempts = j.attempts - 1,
    worker_id = NULL, claim_expires_at = NULL, debounce_key = NULL
WHERE j.id = ANY(ARRAY(SELECT id FROM fenced))
RETURNING j.id;

-- name: dead_letter
-- Fenced move to dead in one statement, hence one transaction: the row is
-- locked under the fencing predicate, deleted, and inserted into alk_dead; the
-- three commit together or not at all (never in both tables, never in neither).
WITH fenced AS MATERIALIZED (
    SELECT id FROM {schema}.alk_jobs
    WHERE id = %(id)s AND queue = %(queue)s AND (state || '') = 'processing'
      AND attempts = %(attempts)s AND claim_expires_at >= {now}
    FOR UPDATE
), moved AS (
    DELETE FROM {schema}.alk_jobs AS j USING fenced WHERE j.id = fenced.id AND j.id = %(id)s
    RETURNING j.*
)
INSERT INTO {schema}.alk_dead (id, queue, payload, priority, run_at, created_at, attempts,
                               max_attempts, visibility_timeout_s, retry_base_s, expires_at,
                               worker_id, claim_expires_at, last_error, died_at, dedupe_key,
                                   partition_key)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       %(error)s::text, {now}, dedupe_key, partition_key
FROM moved;

-- name: heartbeat
-- Fenced absolute reset of the claim deadline (not additive).
WITH fenced AS MATERIALIZED (
    SELECT id FROM {schema}.alk_jobs
    WHERE id = %(id)s AND queue = %(queue)s AND (state || '') = 'processing'
      AND attempts = %(attempts)s AND claim_expires_at >= {now}
    FOR UPDATE
)
UPDATE {schema}.alk_jobs AS j
SET claim_expires_at = {now} + make_interval(
        secs => COALESCE(%(extend)s::float8, j.visibility_timeout_s))
FROM fenced WHERE j.id = fenced.id AND j.id = %(id)s;

-- name: ack_batch
-- Every listed row of this queue that is processing with an unexpired claim.
-- Driven by the primary key only: `state || ''` hides the partial-index
-- predicate from the planner (like SQLite's unary +). Otherwise, with stale
-- statistics, it ANDs in a bitmap scan of alk_jobs_processing over (queue,
-- claim_expires_at >= now()), a range that holds the dead entries of every
-- row acked within the last visibility timeout: it grew with each batch and
-- made a drain slow down as it went.
DELETE FROM {schema}.alk_jobs
WHERE id = ANY(%(ids)b::bigint[]) AND queue = %(queue)s AND (state || '') = 'processing'
  AND claim_expires_at >= {now};

-- name: cancel
-- alkstore.cancelling (until the commit) tells the dependencies trigger that
-- this delete is a cancel, not an ack (migration 0008).
DELETE FROM {schema}.alk_jobs
WHERE id = %(id)s AND queue = %(queue)s
  AND set_config('alkstore.cancelling', 'on', true) = 'on';

-- name: get_job
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, NULL::timestamptz, dedupe_key, partition_key
FROM {schema}.alk_jobs WHERE id = %(id)s AND queue = %(queue)s
UNION ALL
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM {schema}.alk_dead WHERE id = %(id)s AND queue = %(queue)s;

-- name: sweep
-- sweep_expired in one statement (one transaction): every live row of the queue
-- past its expiry, either state, moves to dead; then dead rows older than the
-- retention are purged (:retention NULL keeps them forever), and kept results
-- and dedupe windows past their expiry. The purge sees the
-- statement's snapshot, so rows moved by this very sweep are not purged by it.
WITH expired AS (
    DELETE FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND expires_at IS NOT NULL AND expires_at <= {now}
    RETURNING *
), moved AS (
    INSERT INTO {schema}.alk_dead (id, queue, payload, priority, run_at, created_at, attempts,
                                   max_attempts, visibility_timeout_s, retry_base_s, expires_at,
                                   worker_id, claim_expires_at, last_error, died_at, dedupe_key,
                                   partition_key)
    SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           %(expired_error)s::text, {now}, dedupe_key, partition_key
    FROM expired
    RETURNING 1
), purged AS (
    DELETE FROM {schema}.alk_dead
    WHERE queue = %(queue)s AND %(retention)s::float8 IS NOT NULL
      AND died_at < {now} - make_interval(secs => %(retention)s::float8)
    RETURNING id
), edges AS (
    -- the edges of purged children go with them
    DELETE FROM {schema}.alk_deps WHERE child IN (SELECT id FROM purged)
), results AS (
    -- a parent's result stays while an edge to an unfinished dependent does
    DELETE FROM {schema}.alk_results AS r WHERE queue = %(queue)s AND expires_at <= {now}
      AND NOT EXISTS (SELECT 1 FROM {schema}.alk_deps AS d WHERE d.parent = r.id)
    RETURNING 1
), windows AS (
    DELETE FROM {schema}.alk_dedupe WHERE queue = %(queue)s AND expires_at <= {now}
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM purged),
       (SELECT count(*) FROM results), (SELECT count(*) FROM windows);

-- name: aging_settings
-- Priority aging (core/aging.py), step 1: the queue's interval and its top due
-- priority among jobs never promoted (the front of alk_jobs_claim, past the few
-- promoted jobs there).
SELECT s.aging_s,
       (SELECT max(priority) FROM {schema}.alk_jobs
        WHERE queue = %(queue)s AND state = 'pending' AND run_at <= {now}
          AND promoted_at IS NULL)
FROM {schema}.alk_queues AS s
WHERE s.queue = %(queue)s AND s.aging_s IS NOT NULL;

-- name: promote
-- Priority aging, step 2: each due pending job below :top, or promoted already
-- and below :cap, that has waited k >= 1 intervals since it became due or was
-- last promoted gains k levels, at most to :cap; its promotion time moves on by
-- k intervals (the rest still counts). A promoted job that reached :top climbs
-- on: level with the stream it would still wait behind the stream's older jobs.
-- Walks the entries of alk_jobs_claim below :top. A job claimed meanwhile is
-- left alone (state re-checked on the locked row).
WITH waited AS MATERIALIZED (
    SELECT id,
           LEAST(floor(EXTRACT(EPOCH FROM ({now} - GREATEST(promoted_at, run_at)))
                       / %(aging_s)s::float8), 1000000000)::bigint AS levels
    FROM {schema}.alk_jobs
    WHERE queue = %(queue)s AND state = 'pending' AND priority < %(cap)s::integer
      AND (priority < %(top)s::integer OR promoted_at IS NOT NULL)
      AND run_at <= {now} - make_interval(secs => %(aging_s)s::float8)
      AND GREATEST(promoted_at, run_at) <= {now} - make_interval(secs => %(aging_s)s::float8)
), promoted AS (
    UPDATE {schema}.alk_jobs AS j
    SET priority = LEAST(j.priority::bigint + w.levels, %(cap)s::bigint)::integer,
        promoted_at = GREATEST(j.promoted_at, j.run_at)
                      + make_interval(secs => w.levels * %(aging_s)s::float8)
    FROM waited AS w
    WHERE j.id = w.id AND j.id = ANY(ARRAY(SELECT id FROM waited)) AND j.state = 'pending'
      AND w.levels >= 1
    RETURNING 1
)
SELECT count(*) FROM promoted;

-- name: next_due
-- Seconds until the earliest future moment within :within seconds that something
-- of this queue becomes claimable: a delayed row falls due, or a claim lapses.
-- NULL if nothing is waiting that soon (the caller looks again by then). Bounded,
-- the lapse arm stays off the processing index's entries of claims acked since the
-- last vacuum: each lies a visibility timeout ahead and, unbounded, costs a heap
-- visit until an index scan marks it dead (8-12 ms at the end of a 20,000-job
-- drain here; with an old snapshot held open, every look, docs/benchmarks.md).
SELECT EXTRACT(EPOCH FROM (min(t) - {now}))::float8 FROM (
    (SELECT min(run_at) AS t FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND state = 'pending' AND run_at > {now} AND run_at > created_at
       AND run_at <= {now} + %(within)s * interval '1 second')
    UNION ALL
    (SELECT min(claim_expires_at) FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND state = 'processing' AND claim_expires_at >= {now}
       AND claim_expires_at <= {now} + %(within)s * interval '1 second')
) AS due;

-- name: schedule_marks
SELECT name, last_tick, last_job FROM {schema}.alk_schedules WHERE name = ANY(%(names)s::text[]);

-- name: mark_schedule
-- Move a schedule's mark forward (never back: a stale worker cannot rewind it).
INSERT INTO {schema}.alk_schedules AS s (name, last_tick, last_job, updated_at)
VALUES (%(name)s, %(tick)s, %(job)s, {now})
ON CONFLICT (name) DO UPDATE SET last_tick = EXCLUDED.last_tick,
    last_job = COALESCE(EXCLUDED.last_job, s.last_job), updated_at = EXCLUDED.updated_at
WHERE EXCLUDED.last_tick > s.last_tick;

-- name: notify
SELECT pg_notify(%(channel)s, %(payload)s);

-- name: wake
-- The coalesced wakes of many queues: one statement, one commit.
SELECT pg_notify(c, '') FROM unnest(%(channels)s::text[]) AS c;

-- Admin (alkstore/admin.py): reads and repairs beyond the queue contract.

-- fragment: live_row
-- A live job's columns as the admin listings return them (alk_jobs has no died_at).
id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
last_error, NULL::timestamptz AS died_at, dedupe_key, partition_key

-- name: admin_list_jobs
-- Live and dead rows of one queue (or one state) in id order after %(after)s, at most
-- %(limit)s: a keyset page (never an OFFSET).
SELECT * FROM (
    (SELECT {live_row}
     FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND (%(state)s::text IS NULL OR state = %(state)s::text)
       AND id > %(after)s
     ORDER BY id LIMIT %(limit)s)
    UNION ALL
    (SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
            visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
            last_error, died_at, dedupe_key, partition_key
     FROM {schema}.alk_dead
     WHERE queue = %(queue)s AND (%(state)s::text IS NULL OR %(state)s::text = 'dead')
       AND id > %(after)s
     ORDER BY id LIMIT %(limit)s)
) AS rows
ORDER BY id LIMIT %(limit)s;

-- name: admin_list_jobs_before
-- The page before %(before)s: rows of one queue (or one state), nearest first.
SELECT * FROM (
    (SELECT {live_row}
     FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND (%(state)s::text IS NULL OR state = %(state)s::text)
       AND id < %(before)s
     ORDER BY id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
            visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
            last_error, died_at, dedupe_key, partition_key
     FROM {schema}.alk_dead
     WHERE queue = %(queue)s AND (%(state)s::text IS NULL OR %(state)s::text = 'dead')
       AND id < %(before)s
     ORDER BY id DESC LIMIT %(limit)s)
) AS rows
ORDER BY id DESC LIMIT %(limit)s;

-- name: admin_list_key
-- One partition key's pending and processing rows of a queue (or one of those two
-- states) in id order after %(cursor)s: a keyset page. Each arm is a state whose
-- keyed rows a partial index holds by key (pending: alk_jobs_fair; processing:
-- alk_jobs_partition), so the planner can read the key's own rows of that state
-- and keep the page, a cost bounded by the key's live jobs, not the queue's. No
-- index holds the key of blocked or dead rows: they are not listed here.
SELECT * FROM (
    (SELECT {live_row}
     FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND partition_key = %(key)s AND state = 'pending'
       AND %(state)s::text IS DISTINCT FROM 'processing' AND id > %(cursor)s
     ORDER BY id LIMIT %(limit)s)
    UNION ALL
    (SELECT {live_row}
     FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND partition_key = %(key)s AND state = 'processing'
       AND %(state)s::text IS DISTINCT FROM 'pending' AND id > %(cursor)s
     ORDER BY id LIMIT %(limit)s)
) AS rows
ORDER BY id LIMIT %(limit)s;

-- name: admin_list_key_before
-- The page before %(cursor)s of admin_list_key, nearest first.
SELECT * FROM (
    (SELECT {live_row}
     FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND partition_key = %(key)s AND state = 'pending'
       AND %(state)s::text IS DISTINCT FROM 'processing' AND id < %(cursor)s
     ORDER BY id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT {live_row}
     FROM {schema}.alk_jobs
     WHERE queue = %(queue)s AND partition_key = %(key)s AND state = 'processing'
       AND %(state)s::text IS DISTINCT FROM 'pending' AND id < %(cursor)s
     ORDER BY id DESC LIMIT %(limit)s)
) AS rows
ORDER BY id DESC LIMIT %(limit)s;

-- name: admin_dead_after
-- Dead rows of every queue with id > %(after)s, in id order: a keyset page on the
-- primary key (the dashboard's /dead), never an OFFSET.
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM {schema}.alk_dead
WHERE id > %(after)s ORDER BY id LIMIT %(limit)s;

-- name: admin_dead_before
-- The page before %(before)s: dead rows with id < %(before)s, nearest first.
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM {schema}.alk_dead
WHERE id < %(before)s ORDER BY id DESC LIMIT %(limit)s;

-- name: admin_find_job
-- One row by id in any queue, live or dead (ids are unique across both tables).
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, NULL::timestamptz, dedupe_key, partition_key
FROM {schema}.alk_jobs WHERE id = %(id)s
UNION ALL
SELECT id, queue, payload, 'dead', priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       last_error, died_at, dedupe_key, partition_key
FROM {schema}.alk_dead WHERE id = %(id)s;

-- name: admin_outcomes
-- The latest finished jobs of a queue, newest first: kept results and dead rows.
SELECT * FROM (
    (SELECT id, queue, outcome, value, NULL::text AS error, attempts, finished_at
     FROM {schema}.alk_results WHERE queue = %(queue)s
     ORDER BY finished_at DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT id, queue, 'dead', NULL, last_error, attempts, died_at
     FROM {schema}.alk_dead WHERE queue = %(queue)s
     ORDER BY died_at DESC LIMIT %(limit)s)
) AS finished
ORDER BY finished_at DESC, id DESC LIMIT %(limit)s;

-- name: admin_requeue
-- One statement (one transaction): the dead row back to live pending with the
-- values alkstore.admin decides: %(attempts)s, due at now + %(delay)s, and its
-- expiry cleared unless later than now + %(expiry_cutoff)s. It keeps its id,
-- payload, stamps and last_error (OVERRIDING SYSTEM VALUE: the id is the dead
-- row's, not a new one), its partition key, and its dedupe key unless a live job
-- holds that key now (the unique index allows one).
WITH revived AS (
    DELETE FROM {schema}.alk_dead WHERE id = %(id)s RETURNING *
), back AS (
INSERT INTO {schema}.alk_jobs (id, queue, payload, state, priority, run_at, created_at,
                               attempts, max_attempts, visibility_timeout_s, retry_base_s,
                               expires_at, worker_id, claim_expires_at, last_error,
                               dedupe_key, partition_key)
OVERRIDING SYSTEM VALUE
SELECT id, queue, payload, 'pending', priority,
       {now} + make_interval(secs => %(delay)s::float8), created_at, %(attempts)s::integer,
       max_attempts,
       visibility_timeout_s, retry_base_s,
       CASE WHEN expires_at > {now} + make_interval(secs => %(expiry_cutoff)s::float8)
            THEN expires_at END,
       NULL, NULL, last_error,
       CASE WHEN NOT EXISTS (SELECT 1 FROM {schema}.alk_jobs AS l
                             WHERE l.queue = revived.queue
                               AND l.dedupe_key = revived.dedupe_key) THEN dedupe_key END,
       partition_key
FROM revived
RETURNING queue, partition_key
), touched AS (
    -- back under its fair queue's key cursor (as an enqueue would put it)
    INSERT INTO {schema}.alk_fair AS c (queue, partition_key, vtime)
    SELECT b.queue, b.partition_key,
           COALESCE((SELECT min(vtime) FROM {schema}.alk_fair AS m WHERE m.queue = b.queue), 0)
    FROM back AS b
    WHERE b.partition_key IS NOT NULL
      AND EXISTS (SELECT 1 FROM {schema}.alk_queues AS s WHERE s.queue = b.queue AND s.fair)
    ON CONFLICT (queue, partition_key) DO UPDATE SET vtime = c.vtime WHERE false
)
SELECT queue FROM back;

-- name: admin_stats
-- Per queue: due pending, delayed pending, processing, dead, the age in
-- seconds of the oldest due pending row (NULL when none is due), blocked.
SELECT queue, sum(pending)::bigint, sum(delayed)::bigint, sum(processing)::bigint,
       sum(dead)::bigint, EXTRACT(EPOCH FROM ({now} - min(oldest)))::float8,
       sum(blocked)::bigint
FROM (
    SELECT queue,
           count(*) FILTER (WHERE state = 'pending' AND run_at <= {now}) AS pending,
           count(*) FILTER (WHERE state = 'pending' AND run_at > {now}) AS delayed,
           count(*) FILTER (WHERE state = 'processing') AS processing,
           0 AS dead,
           min(run_at) FILTER (WHERE state = 'pending' AND run_at <= {now}) AS oldest,
           count(*) FILTER (WHERE state = 'blocked') AS blocked
    FROM {schema}.alk_jobs GROUP BY queue
    UNION ALL
    SELECT queue, 0, 0, 0, count(*), NULL, 0 FROM {schema}.alk_dead GROUP BY queue
) AS counts
GROUP BY queue ORDER BY queue;

-- Live workers and outcome history (migration 0002).

-- name: worker_upsert
-- Register or refresh one worker (its heartbeat); started_at is kept on refresh.
INSERT INTO {schema}.alk_workers (id, host, pid, queues, concurrency, running,
                                  started_at, last_seen)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s::text[], %(concurrency)s, %(running)s,
        {now}, {now})
ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    concurrency = excluded.concurrency, running = excluded.running,
    last_seen = excluded.last_seen;

-- name: worker_delete
DELETE FROM {schema}.alk_workers WHERE id = %(id)s;

-- name: worker_purge
-- Workers not seen for :older_than seconds are gone for good.
DELETE FROM {schema}.alk_workers
WHERE last_seen < {now} - make_interval(secs => %(older_than)s);

-- name: worker_list
SELECT id, host, pid, queues, concurrency, running, started_at, last_seen,
       EXTRACT(EPOCH FROM ({now} - last_seen))::float8
FROM {schema}.alk_workers ORDER BY started_at, id;

-- name: worker_page_after
-- A keyset page of workers by id: those with id > %(after)s, in id order (the
-- primary key's range scan).
SELECT id, host, pid, queues, concurrency, running, started_at, last_seen,
       EXTRACT(EPOCH FROM ({now} - last_seen))::float8
FROM {schema}.alk_workers WHERE id > %(after)s ORDER BY id LIMIT %(limit)s;

-- name: worker_page_before
-- The page before %(before)s: workers with id < %(before)s, nearest first.
SELECT id, host, pid, queues, concurrency, running, started_at, last_seen,
       EXTRACT(EPOCH FROM ({now} - last_seen))::float8
FROM {schema}.alk_workers WHERE id < %(before)s ORDER BY id DESC LIMIT %(limit)s;

-- name: outcome_add
-- Add each (queue, outcome, count) to the current minute's bucket.
INSERT INTO {schema}.alk_outcomes (queue, minute, outcome, count)
SELECT q, date_trunc('minute', {now}), o, c
FROM unnest(%(queues)s::text[], %(outcomes)s::text[], %(counts)s::bigint[]) AS t (q, o, c)
ON CONFLICT (queue, minute, outcome) DO UPDATE
SET count = {schema}.alk_outcomes.count + excluded.count;

-- name: outcome_purge
DELETE FROM {schema}.alk_outcomes
WHERE minute < {now} - make_interval(secs => %(older_than)s);

-- name: outcome_history
-- Counts per queue, minute (POSIX seconds) and outcome of the last :seconds.
SELECT queue, EXTRACT(EPOCH FROM minute)::float8, outcome, count
FROM {schema}.alk_outcomes
WHERE minute >= date_trunc('minute', {now} - make_interval(secs => %(seconds)s))
ORDER BY minute, queue, outcome;

-- name: outcome_series
-- Counts per queue, bucket of %(bucket)s seconds (its start, POSIX seconds) and outcome
-- of the last %(seconds)s, of one %(queue)s or all (NULL): the dashboard's charts of a
-- day or a week, summed here so a week of minutes is not sent to be added up in Python.
SELECT queue, b, outcome, sum(count)::bigint
FROM (
    SELECT queue, outcome, count,
           floor(EXTRACT(EPOCH FROM minute) / %(bucket)s)::float8 * %(bucket)s AS b
    FROM {schema}.alk_outcomes
    WHERE minute >= date_trunc('minute', {now} - make_interval(secs => %(seconds)s))
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
) AS m
GROUP BY queue, b, outcome ORDER BY b, queue, outcome;

-- Store copy (alkstore/copy.py): the tables of core/tables.py in its column order.
-- Keys are compared as row values, text COLLATE "C": code point order, as on SQLite.

-- name: copy_counts
-- Rows of each copied table, in core.tables order.
SELECT (SELECT count(*) FROM {schema}.alk_queues),
       (SELECT count(*) FROM {schema}.alk_jobs),
       (SELECT count(*) FROM {schema}.alk_dead),
       (SELECT count(*) FROM {schema}.alk_results),
       (SELECT count(*) FROM {schema}.alk_dedupe),
       (SELECT count(*) FROM {schema}.alk_schedules),
       (SELECT count(*) FROM {schema}.alk_outcomes),
       (SELECT count(*) FROM {schema}.alk_fair),
       (SELECT count(*) FROM {schema}.alk_fair_weights),
       (SELECT count(*) FROM {schema}.alk_attempts),
       (SELECT count(*) FROM {schema}.alk_progress),
       (SELECT count(*) FROM {schema}.alk_steps),
       (SELECT count(*) FROM {schema}.alk_signals),
       (SELECT count(*) FROM {schema}.alk_deps);

-- name: copy_read_queues
-- A page of alk_queues after a key, in key order.
SELECT queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat,
       fair, aging_s
FROM {schema}.alk_queues
WHERE queue COLLATE "C" > %s
ORDER BY queue COLLATE "C"
LIMIT %s;

-- name: copy_write_queues
-- One copied row of alk_queues, as the source had it.
INSERT INTO {schema}.alk_queues (queue, paused, concurrency, partition_concurrency, rate_count, rate_period_s, burst, tat, fair, aging_s)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: copy_read_jobs
-- A page of alk_jobs after a key, in key order.
SELECT id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, last_error, dedupe_key, partition_key, debounce_key, promoted_at, waiting, deps
FROM {schema}.alk_jobs
WHERE id > %s
ORDER BY id
LIMIT %s;

-- name: copy_write_jobs
-- One copied row of alk_jobs, as the source had it.
INSERT INTO {schema}.alk_jobs (id, queue, payload, state, priority, run_at, created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, last_error, dedupe_key, partition_key, debounce_key, promoted_at, waiting, deps) OVERRIDING SYSTEM VALUE
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: copy_read_dead
-- A page of alk_dead after a key, in key order.
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, last_error, died_at, dedupe_key, partition_key
FROM {schema}.alk_dead
WHERE id > %s
ORDER BY id
LIMIT %s;

-- name: copy_write_dead
-- One copied row of alk_dead, as the source had it.
INSERT INTO {schema}.alk_dead (id, queue, payload, priority, run_at, created_at, attempts, max_attempts, visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at, last_error, died_at, dedupe_key, partition_key)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- name: copy_read_results
-- A page of alk_results after a key, in key order.
SELECT id, queue, outcome, value, attempts, finished_at, expires_at
FROM {schema}.alk_results
WHERE id > %s
ORDER BY id
LIMIT %s;

-- name: copy_write_results
-- One copied row of alk_results, as the source had it.
INSERT INTO {schema}.alk_results (id, queue, outcome, value, attempts, finished_at, expires_at)
VALUES (%s, %s, %s, %s, %s, %s, %s);

-- name: copy_read_dedupe
-- A page of alk_dedupe after a key, in key order.
SELECT queue, dedupe_key, job_id, expires_at
FROM {schema}.alk_dedupe
WHERE (queue COLLATE "C", dedupe_key COLLATE "C") > (%s, %s)
ORDER BY queue COLLATE "C", dedupe_key COLLATE "C"
LIMIT %s;

-- name: copy_write_dedupe
-- One copied row of alk_dedupe, as the source had it.
INSERT INTO {schema}.alk_dedupe (queue, dedupe_key, job_id, expires_at)
VALUES (%s, %s, %s, %s);

-- name: copy_read_schedules
-- A page of alk_schedules after a key, in key order.
SELECT name, last_tick, last_job, updated_at
FROM {schema}.alk_schedules
WHERE name COLLATE "C" > %s
ORDER BY name COLLATE "C"
LIMIT %s;

-- name: copy_write_schedules
-- One copied row of alk_schedules, as the source had it.
INSERT INTO {schema}.alk_schedules (name, last_tick, last_job, updated_at)
VALUES (%s, %s, %s, %s);

-- name: copy_read_outcomes
-- A page of alk_outcomes after a key, in key order.
SELECT queue, minute, outcome, count
FROM {schema}.alk_outcomes
WHERE (queue COLLATE "C", minute, outcome COLLATE "C") > (%s, %s, %s)
ORDER BY queue COLLATE "C", minute, outcome COLLATE "C"
LIMIT %s;

-- name: copy_write_outcomes
-- One copied row of alk_outcomes, as the source had it.
INSERT INTO {schema}.alk_outcomes (queue, minute, outcome, count)
VALUES (%s, %s, %s, %s);

-- name: copy_read_fair
-- A page of alk_fair after a key, in key order.
SELECT queue, partition_key, vtime
FROM {schema}.alk_fair
WHERE (queue COLLATE "C", partition_key COLLATE "C") > (%s, %s)
ORDER BY queue COLLATE "C", partition_key COLLATE "C"
LIMIT %s;

-- name: copy_write_fair
-- One copied row of alk_fair, as the source had it.
INSERT INTO {schema}.alk_fair (queue, partition_key, vtime)
VALUES (%s, %s, %s);

-- name: copy_read_fair_weights
-- A page of alk_fair_weights after a key, in key order.
SELECT queue, partition_key, weight
FROM {schema}.alk_fair_weights
WHERE (queue COLLATE "C", partition_key COLLATE "C") > (%s, %s)
ORDER BY queue COLLATE "C", partition_key COLLATE "C"
LIMIT %s;

-- name: copy_write_fair_weights
-- One copied row of alk_fair_weights, as the source had it.
INSERT INTO {schema}.alk_fair_weights (queue, partition_key, weight)
VALUES (%s, %s, %s);

-- name: copy_last_id
-- The highest job id ever handed out (the identity's sequence; 0: none).
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('{schema}.alk_jobs', 'id')::regclass), 0);

-- name: copy_advance_ids
-- Set the identity's sequence: the next job gets the id after this one.
SELECT setval(pg_get_serial_sequence('{schema}.alk_jobs', 'id'), %s);

-- `alkstore doctor` (engines/postgres/health.py): reads of the statistics views.

-- name: health_tables
-- Row statistics of this schema's tables (readable by any role).
SELECT relname::text, n_live_tup, n_dead_tup,
       EXTRACT(EPOCH FROM (now() - last_vacuum))::float8,
       EXTRACT(EPOCH FROM (now() - last_autovacuum))::float8
FROM pg_stat_user_tables WHERE schemaname = %(schema)s ORDER BY relname;

-- name: health_xmin
-- What holds back this database's xmin horizon, oldest first: sessions with a
-- snapshot (another role's only with pg_read_all_stats), prepared
-- transactions and replication slots.
SELECT kind, pid, name, state, xid_age, age_s, query FROM (
    SELECT 'session' AS kind, pid, usename::text AS name, state,
           age(backend_xmin)::int8 AS xid_age,
           EXTRACT(EPOCH FROM (now() - xact_start))::float8 AS age_s, query
    FROM pg_stat_activity
    WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
      AND datname = current_database()
    UNION ALL
    SELECT 'prepared', NULL, gid, NULL, age(transaction)::int8,
           EXTRACT(EPOCH FROM (now() - prepared))::float8, NULL
    FROM pg_prepared_xacts WHERE database = current_database()
    UNION ALL
    SELECT 'slot', NULL, slot_name::text, NULL, age(xmin)::int8, NULL, NULL
    FROM pg_replication_slots WHERE xmin IS NOT NULL
) AS holders
ORDER BY xid_age DESC, age_s DESC NULLS LAST
LIMIT 20;

-- name: health_overdue
-- Claims still processing past their deadline, per queue.
SELECT queue, count(*), EXTRACT(EPOCH FROM ({now} - min(claim_expires_at)))::float8
FROM {schema}.alk_jobs
WHERE state = 'processing' AND claim_expires_at < {now}
GROUP BY queue ORDER BY queue;

-- name: health_clock
-- The database's clock, and whether this role sees other roles' sessions.
SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8,
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE');

-- Dependencies (migration 0008; core/deps.py's flows, engines/postgres/deps.py).

-- name: deps_mark_parents
-- The live parents of a new child get their dependents bit, locked in id
-- order (as ack_many locks): an ack of one of them waits for this commit,
-- and its trigger then sees the bit and the edge.
WITH locked AS MATERIALIZED (
    SELECT id FROM {schema}.alk_jobs WHERE id = ANY(%(ids)s::bigint[])
    ORDER BY id FOR UPDATE
)
UPDATE {schema}.alk_jobs AS j SET deps = j.deps | 1
FROM locked WHERE j.id = locked.id
RETURNING j.id;

-- name: deps_kept_results
SELECT id FROM {schema}.alk_results WHERE id = ANY(%(ids)s::bigint[]);

-- name: deps_dead_rows
SELECT id, last_error FROM {schema}.alk_dead WHERE id = ANY(%(ids)s::bigint[]);

-- name: deps_block
UPDATE {schema}.alk_jobs
SET state = CASE WHEN %(waiting)s::integer > 0 THEN 'blocked' ELSE state END,
    waiting = %(waiting)s::integer, deps = deps | %(deps)s::smallint
WHERE id = %(id)s;

-- name: deps_edges
INSERT INTO {schema}.alk_deps (parent, child, policy, killed)
SELECT p, %(child)s::bigint, %(policy)s::text, p IS NOT DISTINCT FROM %(killed)s::bigint
FROM unnest(%(parents)s::bigint[]) AS p;

-- name: deps_kill
-- A new child whose parent is already dead: dead at once, in one statement.
WITH moved AS (
    DELETE FROM {schema}.alk_jobs WHERE id = %(id)s RETURNING *
)
INSERT INTO {schema}.alk_dead (id, queue, payload, priority, run_at, created_at, attempts,
                               max_attempts, visibility_timeout_s, retry_base_s, expires_at,
                               worker_id, claim_expires_at, last_error, died_at, dedupe_key,
                               partition_key)
SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
       visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
       %(error)s::text, {now}, dedupe_key, partition_key
FROM moved;

-- name: deps_flags
-- A requeued job's bits, from its edges (the dead table keeps no flag).
UPDATE {schema}.alk_jobs
SET deps = (deps & ~3::smallint)
         | (CASE WHEN EXISTS (SELECT 1 FROM {schema}.alk_deps WHERE parent = %(id)s::bigint)
                 THEN 1 ELSE 0 END)::smallint
         | (CASE WHEN EXISTS (SELECT 1 FROM {schema}.alk_deps WHERE child = %(id)s::bigint)
                 THEN 2 ELSE 0 END)::smallint
WHERE id = %(id)s;

-- name: deps_killed_children
SELECT d.child FROM {schema}.alk_deps AS d JOIN {schema}.alk_dead AS x ON x.id = d.child
WHERE d.parent = %(parent)s AND d.killed ORDER BY d.child;

-- name: deps_dead_parents
SELECT d.parent FROM {schema}.alk_deps AS d JOIN {schema}.alk_dead AS x ON x.id = d.parent
WHERE d.child = %(child)s AND d.policy = 'success' ORDER BY d.parent;

-- name: deps_move_kill
UPDATE {schema}.alk_deps SET killed = (parent = %(to)s::bigint)
WHERE child = %(child)s AND parent IN (%(parent)s, %(to)s);

-- name: deps_live_parents
SELECT count(*) FROM {schema}.alk_deps AS d JOIN {schema}.alk_jobs AS j ON j.id = d.parent
WHERE d.child = %(child)s;

-- name: deps_revive
-- A dead-lettered child back to live: blocked on its live parents (pending if
-- none), its edges no longer marked as killing it; the queue if it is pending.
WITH back AS (
    DELETE FROM {schema}.alk_dead WHERE id = %(id)s RETURNING *
), live AS (
    INSERT INTO {schema}.alk_jobs (id, queue, payload, state, priority, run_at, created_at,
                                   attempts, max_attempts, visibility_timeout_s,
                                   retry_base_s, expires_at, worker_id, claim_expires_at,
                                   last_error, dedupe_key, partition_key, waiting, deps)
    OVERRIDING SYSTEM VALUE
    SELECT id, queue, payload,
           CASE WHEN %(waiting)s::integer > 0 THEN 'blocked' ELSE 'pending' END,
           priority, run_at, created_at, 0, max_attempts, visibility_timeout_s, retry_base_s,
           expires_at, NULL, NULL, last_error,
           CASE WHEN NOT EXISTS (SELECT 1 FROM {schema}.alk_jobs AS l
                                 WHERE l.queue = back.queue
                                   AND l.dedupe_key = back.dedupe_key) THEN dedupe_key END,
           partition_key, %(waiting)s::integer,
           (2 | CASE WHEN EXISTS (SELECT 1 FROM {schema}.alk_deps WHERE parent = back.id)
                     THEN 1 ELSE 0 END)::smallint
    FROM back
    RETURNING queue, state
), edges AS (
    UPDATE {schema}.alk_deps SET killed = false WHERE child = %(id)s
)
SELECT queue FROM live WHERE state = 'pending';

-- name: deps_has_edges
SELECT EXISTS (SELECT 1 FROM {schema}.alk_deps WHERE parent = %(id)s)
    OR EXISTS (SELECT 1 FROM {schema}.alk_deps WHERE child = %(id)s);

-- name: deps_edges_of
-- The edges touching a job: (parent, child, policy, killed).
SELECT parent, child, policy, killed FROM {schema}.alk_deps WHERE parent = %(id)s
UNION
SELECT parent, child, policy, killed FROM {schema}.alk_deps WHERE child = %(id)s
ORDER BY 1, 2;

-- name: copy_read_deps
-- A page of alk_deps after a key, in key order.
SELECT parent, child, policy, killed
FROM {schema}.alk_deps
WHERE (parent, child) > (%s, %s)
ORDER BY parent, child
LIMIT %s;

-- name: copy_write_deps
-- One copied row of alk_deps, as the source had it.
INSERT INTO {schema}.alk_deps (parent, child, policy, killed)
VALUES (%s, %s, %s, %s);

-- name: ack_receipted_deleted
-- `ack_receipted` that also returns the ids this very statement deleted (the
-- follow-ups of core/followups.py are written for those only); a separate
-- statement, so the plain batch pays nothing for it.
-- `ack_many` plus its receipt (docs/contract.md, "Ack receipts"), in one
-- statement: the fenced deletes, then the worker's receipt row upserted with
-- the ids of this batch that were not deleted. A retry of the batch (same
-- :token) intersects its refusals with the earlier attempts': an id any
-- attempt deleted drops out. ON CONFLICT DO UPDATE waits for and reads the
-- receipt row's newest committed version, so an earlier attempt still in
-- flight on a dead connection is seen once it commits (it holds the job rows'
-- locks until then, and the deletes here wait for them first). Returns the ids
-- no attempt of this batch deleted. The deletes are `ack_many`'s single fenced
-- DELETE (no `FOR UPDATE` pass first: see `ack` and `ack_many`).
WITH deleted AS (
    DELETE FROM {schema}.alk_jobs AS j
    USING unnest(%(ids)b::bigint[], %(attempts)b::integer[], %(queues)b::text[])
          AS f(id, attempts, queue)
    WHERE j.id = f.id AND j.queue = f.queue AND (j.state || '') = 'processing'
      AND j.attempts = f.attempts AND j.claim_expires_at >= {now}
    RETURNING j.id
), receipt AS (
    INSERT INTO {schema}.alk_ack_receipts AS r (owner, token, refused, at)
    SELECT %(owner)s::text, %(token)s::text,
           COALESCE(array_agg(f.id) FILTER (WHERE d.id IS NULL), '{}'), {now}
    FROM unnest(%(ids)b::bigint[]) AS f(id) LEFT JOIN deleted AS d ON d.id = f.id
    ON CONFLICT (owner) DO UPDATE SET
        refused = CASE WHEN r.token = excluded.token
            THEN ARRAY(SELECT unnest(r.refused) INTERSECT SELECT unnest(excluded.refused))
            ELSE excluded.refused END,
        token = excluded.token, at = excluded.at
    RETURNING r.refused
)
SELECT refused, ARRAY(SELECT id FROM deleted) FROM receipt;


-- Hand-offs to idle workers (migration 0012, docs/postgres.md "Hand-offs").

-- name: insert_handoff
-- One immediately due job with no key, inserted already claimed by an idle
-- worker of its queue when there is one (else as `insert_jobs` would: pending,
-- its wake riding on it with :wake). A worker is idle while its listening
-- connection holds the session advisory lock (:lock_class, slot's key for
-- this second, see `handoff_key`); this transaction's try of the same key in
-- SHARE mode fails exactly then. Up to 16 of the queue's workers are tried, in
-- random order (spreading hand-offs over idle workers; with many busy workers
-- an enqueue tries no more than 16 locks, ~1 µs each); a try that succeeds
-- holds that key shared until this commit, which only delays that worker's
-- next idle lock.
-- open: no settings row gates the queue (paused, limited, fair): such a queue's
-- jobs are claimed as always. The claim is this insert's own: it commits (and
-- waits for its WAL flush) with the job, so no claim statement follows it. The
-- worker is notified with the row (ROW_FIELDS order, payload in base64, built
-- from this statement's parameters: a producer needs no SELECT on the row), or
-- with its id alone when the payload would not fit in a notification.
WITH open AS MATERIALIZED (
    SELECT NOT EXISTS (SELECT 1 FROM {schema}.alk_queues
                       WHERE queue = %(queue)s
                         AND (paused OR concurrency IS NOT NULL
                              OR partition_concurrency IS NOT NULL
                              OR rate_count IS NOT NULL OR fair)) AS ok
), idle AS MATERIALIZED (
    SELECT slot, worker_id, channel FROM {schema}.alk_handoff
    WHERE %(queue)s::text = ANY (queues) AND (SELECT ok FROM open)
    ORDER BY random()
    LIMIT 16
), taker AS MATERIALIZED (
    SELECT worker_id, channel FROM idle
    WHERE NOT pg_try_advisory_xact_lock_shared(
        %(lock_class)s::integer,
        (mod(slot, 8388608) * 256
         + mod(floor(date_part('epoch', {now}))::bigint, 256))::integer)
    LIMIT 1
), inserted AS (
    INSERT INTO {schema}.alk_jobs (queue, payload, priority, run_at, created_at, max_attempts,
                                   visibility_timeout_s, retry_base_s, expires_at, state,
                                   attempts, worker_id, claim_expires_at)
    SELECT %(queue)s::text, %(payload)s::bytea, %(priority)s::integer, {now}, {now},
           %(max_attempts)s::integer, %(visibility)s::float8, %(retry_base)s::float8,
           {now} + make_interval(secs => %(expires_in)s::float8),
           CASE WHEN t.worker_id IS NULL THEN 'pending' ELSE 'processing' END,
           CASE WHEN t.worker_id IS NULL THEN 0 ELSE 1 END, t.worker_id,
           CASE WHEN t.worker_id IS NOT NULL
                THEN {now} + make_interval(secs => %(visibility)s::float8) END
    FROM (SELECT 1) AS one LEFT JOIN taker AS t ON true
    RETURNING id
), noted AS MATERIALIZED (
    SELECT pg_notify(t.channel, CASE
        WHEN octet_length(%(payload)s::bytea) <= 5000 THEN json_build_array(
            i.id, %(queue)s::text, encode(%(payload)s::bytea, 'base64'), 'processing',
            %(priority)s::integer, date_part('epoch', {now}), date_part('epoch', {now}), 1,
            %(max_attempts)s::integer, %(visibility)s::float8, %(retry_base)s::float8,
            date_part('epoch', {now} + make_interval(secs => %(expires_in)s::float8)),
            t.worker_id,
            date_part('epoch', {now} + make_interval(secs => %(visibility)s::float8)))::text
        ELSE json_build_array(i.id)::text END)
    FROM inserted AS i CROSS JOIN taker AS t
), woken AS MATERIALIZED (
    SELECT pg_notify(%(queue)s::text, '')
    WHERE %(wake)s::boolean AND NOT EXISTS (SELECT 1 FROM taker)
)
SELECT id, (SELECT count(*) FROM noted) > 0 FROM inserted
WHERE (SELECT count(*) FROM woken) >= 0;

-- name: handoff_open
-- A worker's hand-off row (its slot: the key of its idle lock); rows of workers
-- gone for :older_than seconds (killed: a stopped worker deletes its own) go.
WITH purged AS (
    DELETE FROM {schema}.alk_handoff AS h
    WHERE h.created_at < {now} - make_interval(secs => %(older_than)s::float8)
      AND NOT EXISTS (SELECT 1 FROM {schema}.alk_workers AS w
                      WHERE w.id = h.worker_id
                        AND w.last_seen >= {now} - make_interval(secs => %(older_than)s::float8))
)
INSERT INTO {schema}.alk_handoff (worker_id, queues, channel, created_at)
VALUES (%(worker)s, %(queues)s::text[], %(channel)s, {now})
RETURNING slot, date_part('epoch', {now});

-- name: handoff_close
DELETE FROM {schema}.alk_handoff WHERE slot = %(slot)s;

-- name: handed_row
-- A handed job whose notification carried its id alone (a payload too large):
-- its row, still this worker's first claim of it.
SELECT id, queue, payload, state, priority, date_part('epoch', run_at),
       date_part('epoch', created_at), attempts, max_attempts, visibility_timeout_s,
       retry_base_s, date_part('epoch', expires_at), worker_id,
       date_part('epoch', claim_expires_at), last_error, NULL::float8, dedupe_key,
       partition_key
FROM {schema}.alk_jobs
WHERE id = %(id)s AND state = 'processing' AND attempts = 1 AND worker_id = %(worker)s;
