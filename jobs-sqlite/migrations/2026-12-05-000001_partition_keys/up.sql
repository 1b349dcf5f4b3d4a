-- Limits per partition key (jobs_driver::partition). A job's key is its metadata's
-- _partition_key entry. The keyed available jobs, by queue and key in claim order: a claim
-- on a queue with a per-key limit finds each next key with one probe and takes each key's
-- first jobs here. Unkeyed jobs are not in it: plain queues pay nothing for the feature.
CREATE INDEX IF NOT EXISTS jobs_partition_idx
    ON jobs (queue, json_extract(meta, '$._partition_key'), priority, scheduled_at, id)
    WHERE state = 'available' AND json_extract(meta, '$._partition_key') IS NOT NULL;

-- Where a queue's turn over its keys stands (jobs_driver::partition::PartitionTurn, JSON
-- text). Written only by claims on a queue with a per-key limit.
ALTER TABLE job_queues ADD COLUMN partition_turn TEXT;
