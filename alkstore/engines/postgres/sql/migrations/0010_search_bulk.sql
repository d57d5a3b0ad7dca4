-- alkstore on PostgreSQL, schema version 10: job search and bulk actions (#26).
-- (Versions 8 and 9 are other changes'; migrations apply in number order.)

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
