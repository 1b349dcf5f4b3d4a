-- A queue's cluster-wide rate limit (jobs_driver::ClaimLimits): the jobs its claims
-- started in the fixed window that began at rate_window (Unix milliseconds), and in the
-- window before it. The limits themselves are in settings (global_limit, rate_allowed,
-- rate_period_secs). Written only by claims on a limited queue, inside the writer's
-- transaction.
ALTER TABLE job_queues ADD COLUMN rate_window INTEGER;
ALTER TABLE job_queues ADD COLUMN rate_used INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_queues ADD COLUMN rate_used_before INTEGER NOT NULL DEFAULT 0;
