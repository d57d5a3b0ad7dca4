-- alkstore on SQLite, schema version 5: dead letters keep their partition key.

-- A dead job keeps the partition of its per-partition concurrency limit, so a
-- requeue puts it back under the same limit (NULL: none).
ALTER TABLE alk_dead ADD COLUMN partition_key TEXT;
