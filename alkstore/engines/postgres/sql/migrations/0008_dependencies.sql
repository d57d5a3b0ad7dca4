-- alkstore on PostgreSQL, schema version 8: dependencies between jobs (docs/contract.md,
-- "Dependencies"). (Versions 9-11 are other changes'; migrations apply in number order.)

-- A job enqueued with EnqueueOpts(after=...) waits in state 'blocked' (in no
-- claim index: they are all partial on 'pending' or 'processing') until its
-- counter `waiting` of unfinished parents reaches 0. `deps` is the flag that
-- keeps this off the plain path: bit 1 the job has dependents, bit 2 it has
-- parents; a job with deps = 0 fires no trigger.
ALTER TABLE {schema}.alk_jobs DROP CONSTRAINT alk_jobs_state_check;
ALTER TABLE {schema}.alk_jobs ADD CONSTRAINT alk_jobs_state_check
    CHECK (state IN ('pending', 'processing', 'blocked'));
ALTER TABLE {schema}.alk_jobs ADD COLUMN waiting integer;
ALTER TABLE {schema}.alk_jobs ADD COLUMN deps smallint NOT NULL DEFAULT 0;

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
