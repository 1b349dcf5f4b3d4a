-- The pending jobs, newest first: the dashboard's count and list of them (no other index
-- holds the state). Built on an empty set: no job is pending before this release.
CREATE INDEX IF NOT EXISTS jobs_pending_idx ON jobs (id) WHERE state = 'pending';
