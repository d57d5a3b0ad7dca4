-- alkstore on SQLite, schema version 6: ack receipts.

-- The proof of a worker's batched ack (docs/contract.md, "Ack receipts"): one
-- row per acking worker, overwritten by each of its ack batches in the batch's
-- own transaction. `token` names the batch (kept by its retries), `refused` is
-- the JSON array of the job ids that no attempt of it deleted. `at` is POSIX
-- seconds.
CREATE TABLE alk_ack_receipts (
    owner   TEXT PRIMARY KEY,
    token   TEXT NOT NULL,
    refused TEXT NOT NULL,
    at      REAL NOT NULL
) WITHOUT ROWID;
