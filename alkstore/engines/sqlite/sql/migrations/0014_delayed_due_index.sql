-- alkstore on SQLite, schema version 14: the "next due" index holds delayed jobs only.
--
-- alk_jobs_pending_due held every pending job, so every enqueue, claim and ack
-- of an immediate job paid one more index entry written. A fair claim's ten
-- jobs sit in ten keys' far-apart runs of that index: ten more pages written
-- per claim (48 WAL frames, 10 of them this index, measured in
-- docs/benchmarks.md). Its one reader, next_due, asks for pending jobs due
-- after now; an immediate job (run_at = created_at, or earlier) is due from
-- the moment it exists, so only jobs whose run_at lies after their creation
-- (delayed, retried with back-off, pushed by a debounce) need a place in it.
-- (A job created by a writer whose clock is ahead of the reader's is missed
-- by next_due until then; the consumer's re-poll covers it, as before a wake.)
DROP INDEX alk_jobs_pending_due;
CREATE INDEX alk_jobs_pending_due ON alk_jobs (queue, run_at)
    WHERE state = 'pending' AND run_at > created_at;
