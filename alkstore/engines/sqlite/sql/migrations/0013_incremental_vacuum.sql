-- alkstore: no-transaction
-- alkstore on SQLite, schema version 13: a file that gives its free pages back.
--
-- Every ack deletes a row; SQLite keeps the freed pages on its freelist, so a
-- store whose backlog once peaked stays at the peak's size forever. With
-- auto_vacuum=INCREMENTAL the sweep (engine.py, `reclaim`) truncates the
-- freelist a bounded number of pages per write unit. The mode of an existing
-- file only changes by a VACUUM, which rewrites the whole file under the
-- write lock: other writers wait (their busy retry, busy_timeout_s) for as long
-- as that takes (about a second per 100 MiB here). A fresh store VACUUMs a
-- file of a few pages. Both statements are idempotent.
PRAGMA auto_vacuum = INCREMENTAL;
VACUUM;
