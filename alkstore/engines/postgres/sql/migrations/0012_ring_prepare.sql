-- alkstore: no-transaction
-- alkstore on PostgreSQL, schema version 12: alk_jobs made ready to become the
-- keep partition of the ring, which migration 0013 builds (docs/postgres.md,
-- "The ring"; schema.sql has the layout's comments).
--
-- Safe with workers running (of this version or an older one): today's table
-- becomes the keep partition (part -1) as it is, rows untouched. Everything
-- that reads the whole table (validating a constraint, building an index) runs
-- here without blocking writers (VALIDATE CONSTRAINT, CREATE INDEX
-- CONCURRENTLY); the swap in 0013 is then catalog work only, in one
-- transaction. (Two migrations: this one's statements run outside a
-- transaction and run again after a crash before its version is recorded; a
-- CONCURRENTLY on alk_jobs after the swap would fail.) Every statement that needs a lock writers wait behind asks
-- for it with lock_timeout = 100ms and tries again after a pause (about a
-- minute of tries, then the migration fails and can be run again): claims queue
-- behind such a request for at most the timeout. Each statement is idempotent,
-- since a crash before the version is recorded runs the file again.

-- 1. The partition key, and the constraints that let ATTACH skip its scan:
-- ADD COLUMN with a constant default and NOT VALID constraints are catalog
-- changes (no rewrite, no scan), but they take the table's lock.
DO $$
DECLARE
    tries integer := 0;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = '{schema}.alk_jobs'::regclass) <> 'r' THEN
        RETURN;  -- already swapped
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
    ALTER TABLE {schema}.alk_jobs ADD COLUMN IF NOT EXISTS part smallint NOT NULL DEFAULT -1;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = '{schema}.alk_jobs'::regclass
                   AND conname = 'alk_jobs_keep_part') THEN
        ALTER TABLE {schema}.alk_jobs ADD CONSTRAINT alk_jobs_keep_part
            CHECK (part = '-1'::smallint) NOT VALID;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = '{schema}.alk_jobs'::regclass
                   AND conname = 'alk_jobs_keyed') THEN
        ALTER TABLE {schema}.alk_jobs ADD CONSTRAINT alk_jobs_keyed
            CHECK ((dedupe_key IS NULL AND debounce_key IS NULL) OR part = -1) NOT VALID;
    END IF;
END
$$;

-- 2. Validate them: a scan under SHARE UPDATE EXCLUSIVE (writers go on).
DO $$
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = '{schema}.alk_jobs'::regclass) = 'r' THEN
        ALTER TABLE {schema}.alk_jobs VALIDATE CONSTRAINT alk_jobs_keep_part;
        ALTER TABLE {schema}.alk_jobs VALIDATE CONSTRAINT alk_jobs_keyed;
    END IF;
END
$$;

-- 3. The keep partition's unique indexes that hold `part`, built beside the old ones
-- without blocking writers, named as the partitioned indexes of schema.sql name
-- them on alk_jobs_keep (the parent's indexes adopt them in 0013).
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS alk_jobs_keep_queue_dedupe_key_part_idx
    ON {schema}.alk_jobs (queue, dedupe_key, part) WHERE dedupe_key IS NOT NULL;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS alk_jobs_keep_queue_debounce_key_part_idx
    ON {schema}.alk_jobs (queue, debounce_key, part)
    WHERE state = 'pending' AND debounce_key IS NOT NULL;
