ALTER TABLE job_queues DROP COLUMN partition_turn;
DROP INDEX IF EXISTS jobs_partition_idx;
