DROP INDEX jobs_workflow_idx ON jobs;
ALTER TABLE jobs DROP COLUMN workflow_id, DROP COLUMN waiting_on, DROP COLUMN failed_on;
CREATE OR REPLACE VIEW jobs_all AS SELECT * FROM jobs;
DROP TABLE job_dependencies;
DROP TABLE job_workflows;
