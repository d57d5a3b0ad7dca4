-- alkstore on PostgreSQL, schema version 13: alk_jobs becomes the ring
-- (docs/postgres.md, "The ring"; schema.sql has the layout's comments), after
-- 0012 made the old table ready to be its keep partition without a scan.
--
-- One transaction, catalog work only (one DO block): the old table becomes
-- alk_jobs_keep under a new partitioned alk_jobs, with the ring beside it. Its
-- ACCESS EXCLUSIVE lock is asked for with lock_timeout = 100ms and asked again
-- after a pause (about a minute of tries, then the migration fails and can be
-- run again): claims queue behind the request for at most the timeout.
DO $$
DECLARE
    tries integer := 0;
    last bigint;
    called boolean;
    r record;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = '{schema}.alk_jobs'::regclass) <> 'r' THEN
        RETURN;
    END IF;
    PERFORM set_config('lock_timeout', '100ms', true);
    LOOP
        BEGIN
            LOCK TABLE {schema}.alk_jobs IN ACCESS EXCLUSIVE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            tries := tries + 1;
            IF tries >= 500 THEN
                RAISE;
            END IF;
            PERFORM pg_sleep(0.02 + 0.1 * random());
        END;
    END LOOP;

    -- ids: the identity's sequence becomes a plain one of the same name and value
    SELECT s.last_value, s.is_called INTO last, called FROM {schema}.alk_jobs_id_seq AS s;
    ALTER TABLE {schema}.alk_jobs ALTER COLUMN id DROP IDENTITY;
    CREATE SEQUENCE {schema}.alk_jobs_id_seq;
    PERFORM setval('{schema}.alk_jobs_id_seq', last, called);
    ALTER TABLE {schema}.alk_jobs ALTER COLUMN id SET DEFAULT nextval('{schema}.alk_jobs_id_seq');

    -- unique keys holding `part` replace the old ones; the primary key on (id)
    -- stays, the keep partition's own
    ALTER TABLE {schema}.alk_jobs RENAME CONSTRAINT alk_jobs_pkey TO alk_jobs_keep_pkey;
    DROP INDEX {schema}.alk_jobs_dedupe;
    DROP INDEX {schema}.alk_jobs_debounce;
    DROP TRIGGER alk_jobs_gone ON {schema}.alk_jobs;

    ALTER TABLE {schema}.alk_jobs RENAME TO alk_jobs_keep;
    ALTER INDEX {schema}.alk_jobs_claim RENAME TO alk_jobs_keep_queue_priority_run_at_id_idx;
    ALTER INDEX {schema}.alk_jobs_due RENAME TO alk_jobs_keep_queue_run_at_idx;
    ALTER INDEX {schema}.alk_jobs_processing RENAME TO alk_jobs_keep_queue_claim_expires_at_idx;
    ALTER INDEX {schema}.alk_jobs_expiry RENAME TO alk_jobs_keep_queue_expires_at_idx;
    ALTER INDEX {schema}.alk_jobs_partition
        RENAME TO alk_jobs_keep_queue_partition_key_claim_expires_at_idx;
    ALTER INDEX {schema}.alk_jobs_fair
        RENAME TO alk_jobs_keep_queue_partition_key_priority_run_at_id_idx;

    CREATE TABLE {schema}.alk_jobs (
        id                   bigint           NOT NULL DEFAULT nextval('{schema}.alk_jobs_id_seq'),
        queue                text             NOT NULL,
        payload              bytea            NOT NULL,
        state                text             NOT NULL DEFAULT 'pending'
                                              CONSTRAINT alk_jobs_state_check
                                              CHECK (state IN ('pending', 'processing', 'blocked')),
        priority             integer          NOT NULL,
        run_at               timestamptz      NOT NULL,
        created_at           timestamptz      NOT NULL,
        attempts             integer          NOT NULL DEFAULT 0,
        max_attempts         integer          NOT NULL,
        visibility_timeout_s double precision NOT NULL,
        retry_base_s         double precision NOT NULL,
        expires_at           timestamptz,
        worker_id            text,
        claim_expires_at     timestamptz,
        last_error           text,
        dedupe_key           text,
        partition_key        text,
        debounce_key         text,
        promoted_at          timestamptz,
        waiting              integer,
        deps                 smallint         NOT NULL DEFAULT 0,
        part                 smallint         NOT NULL DEFAULT -1,
        CONSTRAINT alk_jobs_keyed CHECK ((dedupe_key IS NULL AND debounce_key IS NULL) OR part = -1)
    ) PARTITION BY LIST (part);
    ALTER SEQUENCE {schema}.alk_jobs_id_seq OWNED BY {schema}.alk_jobs.id;
    ALTER TABLE {schema}.alk_jobs ATTACH PARTITION {schema}.alk_jobs_keep FOR VALUES IN (-1);
    ALTER TABLE {schema}.alk_jobs_keep DROP CONSTRAINT alk_jobs_keep_part;
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE {schema}.alk_jobs_p%s PARTITION OF {schema}.alk_jobs '
                       '(PRIMARY KEY (id)) FOR VALUES IN (%s) WITH (fillfactor = 70, '
                       'autovacuum_vacuum_scale_factor = 0.01, '
                       'autovacuum_vacuum_threshold = 1000, '
                       'autovacuum_vacuum_insert_scale_factor = 0.05, '
                       'autovacuum_vacuum_cost_delay = 0, '
                       'autovacuum_analyze_scale_factor = 0.02, '
                       'autovacuum_analyze_threshold = 1000)', i, i);
    END LOOP;

    -- the parent's indexes, as schema.sql declares them: each adopts the keep
    -- partition's index of the same definition and builds one on each (empty)
    -- ring partition
    CREATE INDEX alk_jobs_claim ON {schema}.alk_jobs (queue, priority DESC, run_at, id)
        WHERE state = 'pending';
    CREATE INDEX alk_jobs_due ON {schema}.alk_jobs (queue, run_at)
        WHERE state = 'pending' AND run_at > created_at;
    CREATE INDEX alk_jobs_processing ON {schema}.alk_jobs (queue, claim_expires_at)
        WHERE state = 'processing';
    CREATE INDEX alk_jobs_expiry ON {schema}.alk_jobs (queue, expires_at)
        WHERE expires_at IS NOT NULL;
    CREATE UNIQUE INDEX alk_jobs_dedupe ON {schema}.alk_jobs (queue, dedupe_key, part)
        WHERE dedupe_key IS NOT NULL;
    CREATE INDEX alk_jobs_partition ON {schema}.alk_jobs (queue, partition_key, claim_expires_at)
        WHERE state = 'processing' AND partition_key IS NOT NULL;
    CREATE UNIQUE INDEX alk_jobs_debounce ON {schema}.alk_jobs (queue, debounce_key, part)
        WHERE state = 'pending' AND debounce_key IS NOT NULL;
    CREATE INDEX alk_jobs_fair
        ON {schema}.alk_jobs (queue, partition_key, priority DESC, run_at, id)
        WHERE state = 'pending' AND partition_key IS NOT NULL;
    CREATE TRIGGER alk_jobs_gone AFTER DELETE ON {schema}.alk_jobs
        FOR EACH ROW WHEN (OLD.deps <> 0) EXECUTE FUNCTION {schema}.alk_job_gone();

    CREATE TABLE {schema}.alk_ring (
        one       boolean     PRIMARY KEY DEFAULT true CHECK (one),
        slot      smallint    NOT NULL CHECK (slot BETWEEN 0 AND 7),
        turned_id bigint      NOT NULL,
        turned_at timestamptz NOT NULL
    );
    INSERT INTO {schema}.alk_ring (slot, turned_id, turned_at)
    VALUES (0, COALESCE(pg_sequence_last_value('{schema}.alk_jobs_id_seq'), 0), now());
    CREATE FUNCTION {schema}.alk_ring_current() RETURNS smallint
    LANGUAGE sql STABLE AS $f$SELECT slot FROM {schema}.alk_ring$f$;

    -- the roles granted on the old table keep their access through the new one:
    -- the same privileges on alk_jobs (table and column grants); the ring's row
    -- to read (inserters, readers) and turn (updaters); the id sequence to draw
    -- from (inserters: an identity needed no grant); TRUNCATE of the ring
    -- partitions to the roles that may DELETE (the maintenance step).
    FOR r IN
        SELECT a.privilege_type AS priv,
               CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                    ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS who
        FROM pg_class AS c, aclexplode(c.relacl) AS a
        WHERE c.oid = '{schema}.alk_jobs_keep'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON {schema}.alk_jobs TO %s', r.priv, r.who);
        IF r.priv IN ('SELECT', 'INSERT') THEN
            EXECUTE format('GRANT SELECT ON {schema}.alk_ring TO %s', r.who);
        END IF;
        IF r.priv = 'UPDATE' THEN
            EXECUTE format('GRANT UPDATE ON {schema}.alk_ring TO %s', r.who);
        END IF;
        IF r.priv = 'INSERT' THEN
            EXECUTE format('GRANT USAGE ON SEQUENCE {schema}.alk_jobs_id_seq TO %s', r.who);
        END IF;
        IF r.priv = 'DELETE' THEN
            FOR i IN 0..7 LOOP
                EXECUTE format('GRANT TRUNCATE ON {schema}.alk_jobs_p%s TO %s', i, r.who);
            END LOOP;
        END IF;
    END LOOP;
    FOR r IN
        SELECT a.privilege_type AS priv, quote_ident(t.attname) AS col,
               CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                    ELSE quote_ident(pg_get_userbyid(a.grantee)) END AS who
        FROM pg_attribute AS t, aclexplode(t.attacl) AS a
        WHERE t.attrelid = '{schema}.alk_jobs_keep'::regclass AND t.attacl IS NOT NULL
    LOOP
        EXECUTE format('GRANT %s (%s) ON {schema}.alk_jobs TO %s', r.priv, r.col, r.who);
        IF r.priv = 'SELECT' THEN
            EXECUTE format('GRANT SELECT ON {schema}.alk_ring TO %s', r.who);
        END IF;
    END LOOP;
END
$$;
