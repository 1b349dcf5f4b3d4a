ALTER TABLE job_queues DROP COLUMN rate_window, DROP COLUMN rate_counts;
