-- Limits per partition key (jobs_driver::partition). A job's key is its metadata's
-- _partition_key entry. The keyed available jobs, by queue and key in claim order: a claim
-- on a queue with a per-key limit lists the keys with one probe each and takes each key's
-- first jobs here. Unkeyed jobs are not in it: plain queues pay nothing for the feature.
-- On a large table, build it first without blocking writes:
--   CREATE INDEX CONCURRENTLY jobs_partition_idx ON jobs (queue, (meta ->> '_partition_key'), priority, scheduled_at, id) WHERE state = 'available' AND (meta ->> '_partition_key') IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_partition_idx ON jobs (queue, (meta ->> '_partition_key'), priority, scheduled_at, id)
    WHERE state = 'available' AND (meta ->> '_partition_key') IS NOT NULL;

-- Where a queue's turn over its keys stands (jobs_driver::partition::PartitionTurn, JSON
-- text). Written only by claims on a queue with a per-key limit, under the row's lock.
ALTER TABLE job_queues ADD COLUMN partition_turn text;
