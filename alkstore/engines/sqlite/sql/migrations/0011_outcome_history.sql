-- alkstore on SQLite, schema version 11: the outcome history kept for days.

-- The per-minute outcome counts (alk_outcomes, version 3) are now kept for a
-- week by default (the worker's history_retention_s), and the workers purge
-- old minutes at each write: by the primary key (queue first) that DELETE read
-- the whole table. This index makes the purge, and the dashboard's reads of a
-- time range across queues, a range scan of the minutes concerned.
CREATE INDEX alk_outcomes_minute ON alk_outcomes (minute);
