ALTER TABLE job_queues DROP COLUMN rate_window;
ALTER TABLE job_queues DROP COLUMN rate_used;
ALTER TABLE job_queues DROP COLUMN rate_used_before;
