DROP INDEX IF EXISTS jobs_pending_idx;
