-- alkstore on postgres: the CURRENT schema, built at once (a fresh store at the latest version).
-- Every migration in sql/migrations/, applied in order, must build exactly this
-- catalog (tests/contract/test_migrations.py compares them): a migration that
-- changes the schema changes this file too.
-- Every name is qualified with {schema}, which the engine formats once with a
-- quoted identifier (psycopg.sql.Identifier); no other text is ever pasted in.
-- Times are timestamptz from the server's clock (now()); durations are float8 seconds.

-- Live jobs: the hot table. Every job is inserted, updated once per claim
-- (plus retries and heartbeats) and deleted, so the table is all churn.
--
-- fillfactor = 70 leaves 30% of each heap page free. The claim UPDATE changes
-- `state`, which the partial indexes below are defined on, so it cannot be a
-- HOT update; but with free room on the page PostgreSQL still writes the new
-- row version on the same page (one page dirtied and WAL-logged instead of two),
-- and retry/heartbeat updates that land on a page with room stay local too.
--
-- Autovacuum: the defaults wait until 20% of the table is dead (scale factor
-- 0.2), which for a queue means the claim index fills with dead entries at
-- its front and every claim walks over them. Vacuum instead after a fixed
-- 1000 dead rows + 1% of the table, without cost-based sleeping (the table is
-- small when healthy, so a vacuum is cheap), and analyze often enough that
-- the planner knows the table is small and keeps choosing the claim index.
CREATE TABLE {schema}.alk_jobs (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue                text             NOT NULL,
    payload              bytea            NOT NULL,
    state                text             NOT NULL DEFAULT 'pending'
                                          CHECK (state IN ('pending', 'processing', 'blocked')),
    priority             integer          NOT NULL,
    run_at               timestamptz      NOT NULL,
    created_at           timestamptz      NOT NULL,
    attempts             integer          NOT NULL DEFAULT 0,
    max_attempts         integer          NOT NULL,
    visibility_timeout_s double precision NOT NULL,
    retry_base_s         double precision NOT NULL,
    expires_at           timestamptz,
    worker_id            text,
    claim_expires_at     timestamptz,
    last_error           text,
    dedupe_key           text,
    -- the partition of a per-partition concurrency limit (NULL: none); schema v4
    partition_key        text,
    -- one pending job per debounce key (NULL: none); schema v7
    debounce_key         text,
    -- the last priority-aging promotion (NULL: none); schema v7
    promoted_at          timestamptz,
    -- a blocked job's count of parents not yet finished (NULL: never blocked); schema v8
    waiting              integer,
    -- bit 1: has dependents, bit 2: has parents (0: the plain path); schema v8
    deps                 smallint         NOT NULL DEFAULT 0
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 1000
);

-- The claim's pending arm: claimable rows of one queue in claim order
-- (priority DESC, run_at, id). Partial, so processing rows (in flight) are not
-- in it at all and the index stays as small as the backlog; the claim walks it
-- from the front and stops at LIMIT, with no sort. `run_at <= now()` is
-- checked on the index entries (delayed rows are skipped without a heap visit).
CREATE INDEX alk_jobs_claim ON {schema}.alk_jobs (queue, priority DESC, run_at, id)
    WHERE state = 'pending';

-- The earliest delayed row of a queue (the wake loop's "next due" timer):
-- min(run_at) over future pending rows, which the claim index (priority
-- first) cannot answer without walking every priority. A pending row due in
-- the future always has run_at > created_at, so only delayed and retried rows
-- are in this index: plain enqueues never write to it. The predicate also keeps
-- the planner from using it for the claim (the claim's WHERE does not imply
-- it): with stale statistics a (queue, run_at) index over all pending rows was
-- chosen for the claim, which then sorted the whole backlog.
CREATE INDEX alk_jobs_due ON {schema}.alk_jobs (queue, run_at)
    WHERE state = 'pending' AND run_at > created_at;

-- In-flight rows by deadline: the reclaim arm of the claim, the pre-claim
-- exhausted sweep and the "next lapse" timer all ask for processing rows of a
-- queue whose claim_expires_at is below (or just above) now().
CREATE INDEX alk_jobs_processing ON {schema}.alk_jobs (queue, claim_expires_at)
    WHERE state = 'processing';

-- sweep_expired; rows without an expiry (the common case) are not in it.
CREATE INDEX alk_jobs_expiry ON {schema}.alk_jobs (queue, expires_at)
    WHERE expires_at IS NOT NULL;

-- Dead letters keep the job's id, payload, attempts and stamps. Written once,
-- read rarely, purged by retention: default storage settings.
CREATE TABLE {schema}.alk_dead (
    id                   bigint           PRIMARY KEY,
    queue                text             NOT NULL,
    payload              bytea            NOT NULL,
    priority             integer          NOT NULL,
    run_at               timestamptz      NOT NULL,
    created_at           timestamptz      NOT NULL,
    attempts             integer          NOT NULL,
    max_attempts         integer          NOT NULL,
    visibility_timeout_s double precision NOT NULL,
    retry_base_s         double precision NOT NULL,
    expires_at           timestamptz,
    worker_id            text,
    claim_expires_at     timestamptz,
    last_error           text,
    died_at              timestamptz      NOT NULL,
    dedupe_key           text,
    -- the partition key the job had when it died (NULL: none); schema v5
    partition_key        text
);

-- Retention purge per queue.
CREATE INDEX alk_dead_died ON {schema}.alk_dead (queue, died_at);

-- Schema version 2: deduplication keys, kept results, schedules.

-- A job's dedupe key (NULL: none). alk_jobs holds only live rows (pending or
-- processing), so a unique index over it is exactly "one live job per key and
-- queue": INSERT ... ON CONFLICT DO NOTHING makes the database the judge.
-- Adding a NULL column with no default is a catalog change only.
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

-- Schema version 3: live workers and outcome history (migration 0003_workers).
-- One row per running worker, refreshed with its heartbeat; deleted when it
-- stops, or by another worker's cleanup once it has not been seen for long.
CREATE TABLE {schema}.alk_workers (
    id          text        PRIMARY KEY,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    queues      text[]      NOT NULL,
    concurrency integer     NOT NULL,
    running     integer     NOT NULL,
    started_at  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL
);

-- Jobs finished per queue, minute and outcome (success, retry, dead, lost,
-- interrupted), added to by the workers; the dashboard's throughput and
-- failure-rate chart reads the last hour. Old minutes are purged by the workers.
CREATE TABLE {schema}.alk_outcomes (
    queue   text        NOT NULL,
    minute  timestamptz NOT NULL,
    outcome text        NOT NULL,
    count   bigint      NOT NULL,
    PRIMARY KEY (queue, minute, outcome)
);

-- Schema version 4: flow control (pause, limits, partition keys; migration 0004_flow_control).

-- Running jobs per partition (the per-partition limit counts them at each claim).
CREATE INDEX alk_jobs_partition ON {schema}.alk_jobs (queue, partition_key, claim_expires_at)
    WHERE state = 'processing' AND partition_key IS NOT NULL;

-- One row per queue that was ever paused or limited; a queue without a row is
-- unpaused and unlimited. A limited queue's claims lock its row FOR UPDATE, so
-- they count running jobs and spend the rate one at a time (race-free). tat is
-- the rate limiter's state in POSIX seconds (core/flow.py).
CREATE TABLE {schema}.alk_queues (
    queue                 text             PRIMARY KEY,
    paused                boolean          NOT NULL DEFAULT false,
    concurrency           integer          CHECK (concurrency >= 1),
    partition_concurrency integer          CHECK (partition_concurrency >= 1),
    rate_count            integer          CHECK (rate_count >= 1),
    rate_period_s         double precision CHECK (rate_period_s > 0),
    burst                 integer          CHECK (burst >= 1),
    tat                   double precision,
    -- schema v7: fair claiming across partition keys, and the aging interval
    fair                  boolean          NOT NULL DEFAULT false,
    aging_s               double precision CHECK (aging_s > 0)
);

-- Schema version 6: ack receipts (migration 0006_ack_receipts).
-- One row per acking worker, overwritten by each of its ack batches in the
-- batch's own transaction: which batch (token, kept by its retries) and which
-- of its job ids no attempt deleted (docs/contract.md, "Ack receipts").
CREATE TABLE {schema}.alk_ack_receipts (
    owner   text        PRIMARY KEY,
    token   text        NOT NULL,
    refused bigint[]    NOT NULL,
    at      timestamptz NOT NULL
);

-- Schema version 7: fair queues, priority aging, debounce (migration 0007_fair_queues).

-- One PENDING job per debounce key: a claimed job leaves the index, so the next
-- enqueue inserts the next job instead of changing the one that runs.
CREATE UNIQUE INDEX alk_jobs_debounce ON {schema}.alk_jobs (queue, debounce_key)
    WHERE state = 'pending' AND debounce_key IS NOT NULL;

-- A fair claim's probe of one key: its best due pending jobs in claim order.
-- Only keyed rows are in it, so plain enqueues never write to it.
CREATE INDEX alk_jobs_fair ON {schema}.alk_jobs (queue, partition_key, priority DESC, run_at, id)
    WHERE state = 'pending' AND partition_key IS NOT NULL;

-- The key cursors of fair queues: one row per partition key with live jobs,
-- added by the enqueue, pruned by the claim that finds the key empty. vtime
-- grows by 1/weight per job claimed; claims serve the smallest first.
CREATE TABLE {schema}.alk_fair (
    queue         text             NOT NULL,
    partition_key text             NOT NULL,
    vtime         double precision NOT NULL,
    PRIMARY KEY (queue, partition_key)
);
CREATE INDEX alk_fair_order ON {schema}.alk_fair (queue, vtime, partition_key);

-- Per-key weights of fair queues (a key without a row weighs 1).
CREATE TABLE {schema}.alk_fair_weights (
    queue         text             NOT NULL,
    partition_key text             NOT NULL,
    weight        double precision NOT NULL CHECK (weight > 0),
    PRIMARY KEY (queue, partition_key)
);

-- Schema version 9: a job's life (migration 0009_job_life): attempt history, progress,
-- durable steps, signals. See the migration for the comments.
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
    trimmed     boolean     NOT NULL DEFAULT false
);
CREATE INDEX alk_attempts_job ON {schema}.alk_attempts (job_id, id);
CREATE INDEX alk_attempts_queue ON {schema}.alk_attempts (queue, job_id);
CREATE TABLE {schema}.alk_progress (
    job_id     bigint           PRIMARY KEY,
    queue      text             NOT NULL,
    attempt    integer          NOT NULL,
    value      double precision NOT NULL,
    message    text,
    updated_at timestamptz      NOT NULL
);
CREATE INDEX alk_progress_queue ON {schema}.alk_progress (queue, job_id);
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
CREATE TABLE {schema}.alk_signals (
    job_id  bigint      NOT NULL,
    name    text        NOT NULL,
    queue   text        NOT NULL,
    payload text        NOT NULL,
    sent_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, name)
);
CREATE INDEX alk_signals_queue ON {schema}.alk_signals (queue, job_id);
-- Schema version 8: dependencies between jobs (migration 0008_dependencies).
-- State 'blocked', `waiting` and `deps` are in alk_jobs above.

-- The edges: `policy` 'success' (the child runs only if this parent succeeds)
-- or 'complete' (it runs whatever became of it); `killed`: this parent's death
-- dead-lettered the child (a requeue of the parent revives it). An edge lives
-- until its child finishes; while it does, the parent's kept result stays.
CREATE TABLE {schema}.alk_deps (
    parent bigint  NOT NULL,
    child  bigint  NOT NULL,
    policy text    NOT NULL CHECK (policy IN ('success', 'complete')),
    killed boolean NOT NULL DEFAULT false,
    PRIMARY KEY (parent, child)
);
CREATE INDEX alk_deps_child ON {schema}.alk_deps (child);

-- What a parent's end does to its children, in the transaction that ended it
-- (whichever statement deleted the row: every ack path, dead-letter moves,
-- sweeps, cancels). A row deleted while a dead row of its id exists died; one
-- deleted by a cancel (the cancel statement sets alkstore.cancelling, or the
-- row was not processing: only a processing row is ever acked) was cancelled;
-- anything else succeeded. Row locks on the child serialize the decrements,
-- so exactly one parent's transaction sees the counter reach 0.
CREATE FUNCTION {schema}.alk_job_gone() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    why text;
    err text;
    r record;
BEGIN
    SELECT last_error INTO err FROM {schema}.alk_dead WHERE id = OLD.id;
    IF FOUND THEN
        why := format('dependency %s died: %s', OLD.id, COALESCE(err, 'dead'));
    ELSIF OLD.state <> 'processing'
          OR current_setting('alkstore.cancelling', true) = 'on' THEN
        why := format('dependency %s was cancelled', OLD.id);
    END IF;
    IF OLD.deps & 1 <> 0 THEN
        IF why IS NULL THEN
            -- results flow along edges: a parent acked without a value keeps a null one
            INSERT INTO {schema}.alk_results (id, queue, outcome, value, attempts,
                                              finished_at, expires_at)
            VALUES (OLD.id, OLD.queue, 'success', 'null', OLD.attempts, now(), now())
            ON CONFLICT (id) DO NOTHING;
        END IF;
        FOR r IN
            UPDATE {schema}.alk_jobs AS c
            SET waiting = c.waiting - 1,
                state = CASE WHEN c.waiting = 1 THEN 'pending' ELSE 'blocked' END
            FROM {schema}.alk_deps AS d
            WHERE d.parent = OLD.id AND d.child = c.id AND c.state = 'blocked'
              AND (why IS NULL OR d.policy = 'complete')
            RETURNING c.queue, c.state
        LOOP
            IF r.state = 'pending' THEN  -- sent at commit; repeats are folded into one
                PERFORM pg_notify(r.queue, '');
            END IF;
        END LOOP;
        IF why IS NOT NULL THEN
            PERFORM {schema}.alk_kill_children(OLD.id, why);
        END IF;
    END IF;
    IF OLD.deps & 2 <> 0 AND err IS NULL THEN  -- finished: its edges are done
        DELETE FROM {schema}.alk_deps WHERE child = OLD.id;
    END IF;
    RETURN NULL;
END
$$;

-- Dead-letter the blocked children of `parent` over 'success' edges with
-- `why`; deleting them fires alk_job_gone again, which takes the cascade on.
CREATE FUNCTION {schema}.alk_kill_children(parent bigint, why text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH doomed AS (
        UPDATE {schema}.alk_deps AS d SET killed = true
        FROM {schema}.alk_jobs AS c
        WHERE d.parent = alk_kill_children.parent AND d.policy = 'success'
          AND c.id = d.child AND c.state = 'blocked'
        RETURNING d.child
    )
    INSERT INTO {schema}.alk_dead (id, queue, payload, priority, run_at, created_at, attempts,
                                   max_attempts, visibility_timeout_s, retry_base_s,
                                   expires_at, worker_id, claim_expires_at, last_error,
                                   died_at, dedupe_key, partition_key)
    SELECT id, queue, payload, priority, run_at, created_at, attempts, max_attempts,
           visibility_timeout_s, retry_base_s, expires_at, worker_id, claim_expires_at,
           why, now(), dedupe_key, partition_key
    FROM {schema}.alk_jobs WHERE id IN (SELECT child FROM doomed);
    DELETE FROM {schema}.alk_jobs AS c
    USING {schema}.alk_deps AS d
    WHERE d.parent = alk_kill_children.parent AND d.killed AND c.id = d.child
      AND c.state = 'blocked';
END
$$;

-- (In a DO block: the migration splitter reads a bare CREATE TRIGGER as SQLite's,
-- ending at END;.)
DO $$
BEGIN
    CREATE TRIGGER alk_jobs_gone AFTER DELETE ON {schema}.alk_jobs
        FOR EACH ROW WHEN (OLD.deps <> 0) EXECUTE FUNCTION {schema}.alk_job_gone();
END
$$;
-- Schema version 10: job search and bulk actions (migration 0010_search_bulk).

-- A payload as jsonb, or NULL if it is not UTF-8 JSON: the search's JSON terms
-- (task name, argument paths) read payloads through it, and a payload that is
-- not JSON simply matches none of them instead of failing the whole search.
-- Text that cannot start a JSON object or array is turned away before the
-- exception block (which costs a subtransaction).
CREATE FUNCTION {schema}.alk_json(p bytea) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    IF length(p) = 0 OR get_byte(p, 0) NOT IN (123, 91) THEN
        RETURN NULL;
    END IF;
    BEGIN
        RETURN convert_from(p, 'UTF8')::jsonb;
    EXCEPTION WHEN others THEN
        RETURN NULL;
    END;
END
$$;

-- Search and bulk actions on dead jobs by queue, in id order (the keyset of
-- their pages and of an action's batches): one range scan per page or batch.
-- The dead table is written once per dead job, so the index costs little.
CREATE INDEX alk_dead_queue_id ON {schema}.alk_dead (queue, id);

-- One row per bulk action (alkstore/bulk.py): the audit (who, when, the filter
-- as text with absolute times, how many the dry run counted, how many were
-- done) and the cursor that makes the action resumable: the phase (the live
-- table, then the dead one) and the last id done in it. Each batch moves the
-- cursor and `done` in the transaction that changes the jobs, so an interrupted
-- action resumes exactly where its last committed batch ended.
CREATE TABLE {schema}.alk_bulk_actions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action      text        NOT NULL,
    filter      text        NOT NULL,
    priority    integer,
    to_queue    text,
    actor       text        NOT NULL,
    matched     bigint      NOT NULL,
    done        bigint      NOT NULL DEFAULT 0,
    phase       text        NOT NULL CHECK (phase IN ('live', 'dead', 'done')),
    after_id    bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    finished_at timestamptz
);
-- Schema version 11: the outcome history kept for days (migration 0011_outcome_history).

-- The per-minute outcome counts (alk_outcomes, version 3) are now kept for a
-- week by default (the worker's history_retention_s), and the workers purge
-- old minutes at each write: by the primary key (queue first) that DELETE read
-- the whole table. This index makes the purge, and the dashboard's reads of a
-- time range across queues, a range scan of the minutes concerned.
CREATE INDEX alk_outcomes_minute ON {schema}.alk_outcomes (minute);

-- Schema version 12: hand-offs to idle workers (sql/migrations/0012_handoff.sql).
CREATE TABLE {schema}.alk_handoff (
    slot       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    worker_id  text        NOT NULL,
    queues     text[]      NOT NULL,
    channel    text        NOT NULL,
    created_at timestamptz NOT NULL
);
