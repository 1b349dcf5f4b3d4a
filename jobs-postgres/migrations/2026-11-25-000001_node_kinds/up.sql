-- The job kinds each node has registered, so that the dashboard can say which live nodes
-- can run a job (and that none can, for a kind no deployed node knows).
ALTER TABLE job_nodes ADD COLUMN kinds jsonb NOT NULL DEFAULT '[]';
