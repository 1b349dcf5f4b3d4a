ALTER TABLE jobs
    DROP INDEX jobs_claim_idx,
    ADD KEY jobs_claim_idx (queue, state, priority, scheduled_at, id),
    ADD KEY jobs_lock_token_idx (lock_token),
    DROP COLUMN running_token;

CREATE OR REPLACE VIEW jobs_all AS SELECT * FROM jobs;
