DROP INDEX jobs_workflow_idx;
ALTER TABLE jobs DROP COLUMN failed_on;
ALTER TABLE jobs DROP COLUMN waiting_on;
ALTER TABLE jobs DROP COLUMN workflow_id;
DROP TABLE job_dependencies;
DROP TABLE job_workflows;
