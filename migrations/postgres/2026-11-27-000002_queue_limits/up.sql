-- A queue's cluster-wide rate limit (jobs_driver::ClaimLimits): the jobs its claims
-- started in the fixed window that began at rate_window, and in the window before it.
-- The limits themselves are in settings (global_limit, rate_allowed, rate_period_secs).
-- Written only by claims on a limited queue, under the row's lock.
ALTER TABLE job_queues
    ADD COLUMN rate_window      timestamptz,
    ADD COLUMN rate_used        bigint NOT NULL DEFAULT 0,
    ADD COLUMN rate_used_before bigint NOT NULL DEFAULT 0;
