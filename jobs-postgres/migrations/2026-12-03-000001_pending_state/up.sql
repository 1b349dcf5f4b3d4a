-- The `pending` state: a job waiting for other jobs (its workflow dependencies, or the
-- members of the batch it is the callback of), never claimed (jobs_driver::JobState).
-- First in the enum, as in JobState::ALL. `ALTER TYPE … ADD VALUE` may not be used in the
-- transaction that adds it, so this migration runs outside one (metadata.toml) and the
-- index on the new value is the next migration's.
ALTER TYPE job_state ADD VALUE IF NOT EXISTS 'pending' BEFORE 'available';
