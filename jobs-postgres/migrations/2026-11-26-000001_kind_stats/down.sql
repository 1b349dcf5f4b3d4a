DROP TABLE IF EXISTS job_kind_stats;
