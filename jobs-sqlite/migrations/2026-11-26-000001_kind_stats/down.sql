DROP TABLE job_kind_stats;
