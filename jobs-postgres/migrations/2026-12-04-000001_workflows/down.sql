DROP VIEW jobs_all;
CREATE OR REPLACE VIEW jobs_all AS
    SELECT id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
           timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
           errors, result, cancel_requested_at, unique_key, unique_states
    FROM jobs
    UNION ALL
    SELECT id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
           timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
           errors, result, cancel_requested_at, unique_key, unique_states
    FROM jobs_archive;
ALTER TABLE jobs_archive DROP COLUMN workflow_id, DROP COLUMN waiting_on, DROP COLUMN failed_on;
ALTER TABLE jobs DROP COLUMN workflow_id, DROP COLUMN waiting_on, DROP COLUMN failed_on, DROP COLUMN depended_on;
DROP TABLE job_dependencies;
DROP TABLE job_workflows;
