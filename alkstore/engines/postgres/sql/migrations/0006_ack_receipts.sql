-- alkstore on PostgreSQL, schema version 6: ack receipts.

-- The proof of a worker's batched ack (docs/contract.md, "Ack receipts"): one
-- row per acking worker, overwritten by each of its ack batches in the batch's
-- own transaction. `token` names the batch (kept by its retries), `refused`
-- lists the job ids that no attempt of it deleted. A retry whose reply was
-- lost thus learns which of its claims an earlier attempt acked; a row that is
-- merely gone proves nothing (another claim may have acked it). One small row
-- per worker, updated in place (HOT: no indexed column changes).
CREATE TABLE {schema}.alk_ack_receipts (
    owner   text        PRIMARY KEY,
    token   text        NOT NULL,
    refused bigint[]    NOT NULL,
    at      timestamptz NOT NULL
);
