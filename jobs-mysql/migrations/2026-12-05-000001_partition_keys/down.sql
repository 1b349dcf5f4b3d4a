ALTER TABLE job_queues DROP COLUMN partition_turn;
ALTER TABLE jobs DROP KEY jobs_partition_idx, DROP COLUMN partition_key;
CREATE OR REPLACE VIEW jobs_all AS SELECT * FROM jobs;
