DROP VIEW jobs_all;
