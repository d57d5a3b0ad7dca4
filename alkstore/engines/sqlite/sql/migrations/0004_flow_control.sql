-- alkstore on SQLite, schema version 4: flow control (pause, limits, partition keys).

-- The partition a job belongs to for a per-partition concurrency limit (NULL: none).
ALTER TABLE alk_jobs ADD COLUMN partition_key TEXT;

-- Running jobs per partition (the per-partition limit counts them at each claim).
CREATE INDEX alk_jobs_partition ON alk_jobs (queue, partition_key, claim_expires_at)
    WHERE state = 'processing' AND partition_key IS NOT NULL;

-- One row per queue that was ever paused or limited; a queue without a row is
-- unpaused and unlimited. tat is the rate limiter's state (core/flow.py).
CREATE TABLE alk_queues (
    queue                 TEXT    PRIMARY KEY,
    paused                INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    concurrency           INTEGER CHECK (concurrency >= 1),
    partition_concurrency INTEGER CHECK (partition_concurrency >= 1),
    rate_count            INTEGER CHECK (rate_count >= 1),
    rate_period_s         REAL    CHECK (rate_period_s > 0),
    burst                 INTEGER CHECK (burst >= 1),
    tat                   REAL
) WITHOUT ROWID;
