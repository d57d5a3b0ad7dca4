-- alkstore on SQLite, schema version 3: live workers and outcome history.

-- One row per running worker, refreshed with its heartbeat; deleted when it
-- stops, or by another worker's cleanup once it has not been seen for long.
CREATE TABLE alk_workers (
    id          TEXT    PRIMARY KEY,
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    queues      TEXT    NOT NULL,
    concurrency INTEGER NOT NULL,
    running     INTEGER NOT NULL,
    started_at  REAL    NOT NULL,
    last_seen   REAL    NOT NULL
);

-- Jobs finished per queue, minute and outcome (success, retry, dead, lost,
-- interrupted), added to by the workers; the dashboard's throughput and
-- failure-rate chart reads the last hour. `minute` is POSIX seconds of the
-- minute's start. Old minutes are purged by the workers.
CREATE TABLE alk_outcomes (
    queue   TEXT    NOT NULL,
    minute  INTEGER NOT NULL,
    outcome TEXT    NOT NULL,
    count   INTEGER NOT NULL,
    PRIMARY KEY (queue, minute, outcome)
) WITHOUT ROWID;
