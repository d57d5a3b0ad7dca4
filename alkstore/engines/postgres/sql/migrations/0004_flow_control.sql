-- alkstore on PostgreSQL, schema version 4: flow control (pause, limits, partition keys).

-- The partition a job belongs to for a per-partition concurrency limit (NULL: none).
ALTER TABLE {schema}.alk_jobs ADD COLUMN partition_key text;

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
    tat                   double precision
);
