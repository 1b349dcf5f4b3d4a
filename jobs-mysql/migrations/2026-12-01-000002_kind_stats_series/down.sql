ALTER TABLE job_kind_stats DROP KEY job_kind_stats_series_idx;
