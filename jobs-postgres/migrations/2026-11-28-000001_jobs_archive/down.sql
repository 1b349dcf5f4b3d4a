INSERT INTO jobs (id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
                  timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
                  errors, result, cancel_requested_at, unique_key, unique_states)
SELECT id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
       timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
       errors, result, cancel_requested_at, unique_key, unique_states
FROM jobs_archive;
DROP VIEW jobs_all;
DROP INDEX jobs_archivable_idx;
DROP TABLE jobs_archive;
