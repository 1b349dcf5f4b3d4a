ALTER TABLE job_nodes DROP COLUMN kind_options;
