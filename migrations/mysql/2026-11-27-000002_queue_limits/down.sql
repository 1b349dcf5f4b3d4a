ALTER TABLE job_queues DROP COLUMN rate_window, DROP COLUMN rate_used, DROP COLUMN rate_used_before;
