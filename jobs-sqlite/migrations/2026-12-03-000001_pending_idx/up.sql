-- The `pending` state (jobs_driver::JobState: waiting for other jobs, never claimed): the
-- dashboard's count and list of pending jobs, newest first. The state column is text, so
-- the state itself needs no change.
CREATE INDEX IF NOT EXISTS jobs_pending_idx ON jobs (id) WHERE state = 'pending';
