-- alkstore on SQLite, schema version 7: fair queues, priority aging, debounce.
-- (Version 6 is another change's; migrations apply in number order.)

-- Per-queue switches beside the limits: fair claiming across partition keys,
-- and the aging interval (seconds a due job waits per priority level gained).
ALTER TABLE alk_queues ADD COLUMN fair INTEGER NOT NULL DEFAULT 0 CHECK (fair IN (0, 1));
ALTER TABLE alk_queues ADD COLUMN aging_s REAL CHECK (aging_s > 0);

-- debounce_key: one pending job per key, replaced in place by the next enqueue;
-- promoted_at: the last aging promotion (NULL: none).
ALTER TABLE alk_jobs ADD COLUMN debounce_key TEXT;
ALTER TABLE alk_jobs ADD COLUMN promoted_at REAL;

-- One PENDING job per debounce key (a claimed job leaves the index).
CREATE UNIQUE INDEX alk_jobs_debounce ON alk_jobs (queue, debounce_key)
    WHERE state = 'pending' AND debounce_key IS NOT NULL;

-- A fair claim's probe of one key: its best due pending jobs in claim order.
CREATE INDEX alk_jobs_fair ON alk_jobs (queue, partition_key, priority DESC, run_at, id)
    WHERE state = 'pending' AND partition_key IS NOT NULL;

-- The key cursors of fair queues (see the PostgreSQL schema).
CREATE TABLE alk_fair (
    queue         TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    vtime         REAL NOT NULL,
    PRIMARY KEY (queue, partition_key)
) WITHOUT ROWID;
CREATE INDEX alk_fair_order ON alk_fair (queue, vtime, partition_key);

-- Per-key weights of fair queues (a key without a row weighs 1).
CREATE TABLE alk_fair_weights (
    queue         TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    weight        REAL NOT NULL CHECK (weight > 0),
    PRIMARY KEY (queue, partition_key)
) WITHOUT ROWID;
