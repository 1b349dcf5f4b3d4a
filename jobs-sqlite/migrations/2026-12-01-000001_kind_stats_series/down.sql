DROP INDEX IF EXISTS job_kind_stats_series_idx;
