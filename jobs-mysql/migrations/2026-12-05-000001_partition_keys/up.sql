-- Limits per partition key (jobs_driver::partition). A job's key is its metadata's
-- _partition_key entry, here a generated column (binary collation, as the engine
-- compares keys; keys never end in a space, which this collation would ignore). The
-- available jobs by queue and key in claim order: a claim on a queue with a per-key limit
-- walks the keys (one probe each) and takes each key's first jobs here. Unkeyed
-- jobs are in it under NULL (MariaDB and MySQL have no partial index).
--
-- The column is STORED, as running_token is (MariaDB 10.11 reads an index on a VIRTUAL
-- column wrongly right after the row changed): the ALTER copies the table. See the
-- changelog.
ALTER TABLE jobs
    ADD COLUMN partition_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
        AS (JSON_UNQUOTE(JSON_EXTRACT(meta, '$._partition_key'))) STORED,
    ADD KEY jobs_partition_idx (queue, state, partition_key, priority, scheduled_at, id);

-- The view names jobs' columns as they were when it was made: make it again.
CREATE OR REPLACE VIEW jobs_all AS SELECT * FROM jobs;

-- Where a queue's turn over its keys stands (jobs_driver::partition::PartitionTurn, JSON
-- text). Written only by claims on a queue with a per-key limit, under the row's lock.
ALTER TABLE job_queues ADD COLUMN partition_turn TEXT NULL;
