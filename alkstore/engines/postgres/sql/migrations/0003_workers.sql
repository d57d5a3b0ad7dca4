-- alkstore on PostgreSQL, schema version 3: live workers and outcome history.

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
