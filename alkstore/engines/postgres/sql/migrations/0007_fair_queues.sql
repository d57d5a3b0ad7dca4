-- alkstore on PostgreSQL, schema version 7: fair queues, priority aging, debounce.
-- (Version 6 is another change's; migrations apply in number order.)

-- Per-queue switches beside the limits: fair claiming across partition keys,
-- and the aging interval (seconds a due job waits per priority level gained).
ALTER TABLE {schema}.alk_queues ADD COLUMN fair boolean NOT NULL DEFAULT false;
ALTER TABLE {schema}.alk_queues ADD COLUMN aging_s double precision CHECK (aging_s > 0);

-- debounce_key: one pending job per key (EnqueueOpts.debounce_key), replaced in
-- place by the next enqueue; promoted_at: the last aging promotion (NULL: none).
ALTER TABLE {schema}.alk_jobs ADD COLUMN debounce_key text;
ALTER TABLE {schema}.alk_jobs ADD COLUMN promoted_at timestamptz;

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
