ALTER TABLE job_queues DROP COLUMN rate_window;
ALTER TABLE job_queues DROP COLUMN rate_counts;
