DROP INDEX IF EXISTS jobs_created_idx;
