ALTER TABLE job_nodes DROP COLUMN lock_path;
