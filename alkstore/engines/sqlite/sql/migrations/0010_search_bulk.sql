-- alkstore on SQLite, schema version 10: job search and bulk actions (#26).
-- (Versions 8 and 9 are other changes'; migrations apply in number order.)

-- Search and bulk actions on dead jobs by queue, in id order (the keyset of
-- their pages and of an action's batches).
CREATE INDEX alk_dead_queue_id ON alk_dead (queue, id);

-- One row per bulk action: the audit and the resumable cursor (see the
-- PostgreSQL schema). Times are REAL POSIX seconds.
CREATE TABLE alk_bulk_actions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    action      TEXT    NOT NULL,
    filter      TEXT    NOT NULL,
    priority    INTEGER,
    to_queue    TEXT,
    actor       TEXT    NOT NULL,
    matched     INTEGER NOT NULL,
    done        INTEGER NOT NULL DEFAULT 0,
    phase       TEXT    NOT NULL CHECK (phase IN ('live', 'dead', 'done')),
    after_id    INTEGER NOT NULL DEFAULT 0,
    created_at  REAL    NOT NULL,
    updated_at  REAL    NOT NULL,
    finished_at REAL
);
