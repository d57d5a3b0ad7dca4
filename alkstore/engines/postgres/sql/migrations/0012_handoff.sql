-- alkstore on PostgreSQL, schema version 12: hand-offs to idle workers (#28).

-- One row per worker that takes hand-offs (written when it starts, deleted when
-- it stops; a killed worker's row is purged with its registry row). No row is
-- updated while jobs flow: whether the worker is idle right now is not stored
-- here but in a session advisory lock its listening connection holds
-- (docs/postgres.md "Hand-offs"), so a hand-off leaves no dead tuple behind.
-- channel: where its hand-offs are notified (random per worker: channels are
-- database-wide, a schema name does not fit in one).
CREATE TABLE {schema}.alk_handoff (
    slot       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    worker_id  text        NOT NULL,
    queues     text[]      NOT NULL,
    channel    text        NOT NULL,
    created_at timestamptz NOT NULL
);
