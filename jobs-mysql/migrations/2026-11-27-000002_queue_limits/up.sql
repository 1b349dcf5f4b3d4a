-- A queue's cluster-wide rate limit (jobs_driver::ClaimLimits): the starts its claims
-- counted in each slice of the period (rate_counts: a JSON array, oldest first), the
-- newest slice beginning at rate_window (UTC). The limits themselves are in settings
-- (global_limit, rate_allowed, rate_period_secs). Written only by claims on a limited
-- queue, under the row's lock.
ALTER TABLE job_queues
    ADD COLUMN rate_window DATETIME(6) NULL,
    ADD COLUMN rate_counts TEXT        NULL;
