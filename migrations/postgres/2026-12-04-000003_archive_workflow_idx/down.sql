DROP INDEX CONCURRENTLY IF EXISTS jobs_archive_workflow_idx;
