DROP INDEX IF EXISTS jobs_archive_tags_idx;
DROP INDEX IF EXISTS jobs_archive_kind_idx;
