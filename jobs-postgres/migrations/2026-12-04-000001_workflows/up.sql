-- Workflows: jobs that wait for other jobs (docs/design/workflows.md). Every statement
-- that reads or writes these tables is in jobs-postgres/src/workflows.rs; the rules are
-- jobs_driver::workflow's.

-- A group of jobs inserted together, for people (the dashboard) and for what a failed
-- dependency does to its dependents.
CREATE TABLE job_workflows (
    id          bigserial   PRIMARY KEY,
    name        text        NOT NULL,
    -- 'cancel': a dependent whose dependency failed it is cancelled; 'hold': it stays
    -- pending for a person
    on_failure  text        NOT NULL CHECK (on_failure IN ('cancel', 'hold')),
    -- a batch's callback (NULL: a workflow), and when the batch was sealed (NULL: members
    -- may still join; the callback waits for the seal)
    callback_id bigint,
    sealed_at   timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per dependency (an edge): `job_id` waits for `depends_on`. `outcome` is the
-- dependency's final state once settled (NULL until then), `result` its result, copied
-- then for a dependent that needs it completed, so that pruning or deleting the
-- dependency never takes what the dependent reads.
CREATE TABLE job_dependencies (
    depends_on bigint    NOT NULL,
    job_id     bigint    NOT NULL,
    -- the dependency's kind, for the dependent's typed read of its result
    kind       text      NOT NULL,
    -- 'completed': the dependency must complete (a workflow's step); 'finished': any final
    -- state will do (a batch's callback)
    needs      text      NOT NULL CHECK (needs IN ('completed', 'finished')),
    outcome    job_state,
    result     jsonb,
    PRIMARY KEY (depends_on, job_id)
);
-- A job's dependencies (its context's results, the dashboard, deleting its edges).
CREATE INDEX job_dependencies_job_idx ON job_dependencies (job_id);
-- The unsettled edges: what the settler's sweep reads, and the eager settle's probe. An
-- edge leaves it when settled, so it stays as small as the work in flight.
CREATE INDEX job_dependencies_unsettled_idx ON job_dependencies (depends_on) WHERE outcome IS NULL;

-- On every job: its workflow, and its counters, kept by the settle whatever the job's
-- state: `waiting_on` its unsettled edges, `failed_on` its settled edges whose outcome did
-- not meet its needs. A pending job becomes due when both are zero. Constant defaults:
-- adding them rewrites no row.
-- `depended_on` (in `jobs` only): an insert added an edge out of the job while it was
-- unfinished, and locked it doing so. A success on a delete-on-completion queue reads it
-- after waiting for that insert's commit (the row read after a wait is the latest, where
-- the edge may be past the statement's snapshot), and keeps the job for its dependents.
ALTER TABLE jobs ADD COLUMN workflow_id bigint,
                 ADD COLUMN waiting_on integer NOT NULL DEFAULT 0,
                 ADD COLUMN failed_on integer NOT NULL DEFAULT 0,
                 ADD COLUMN depended_on boolean NOT NULL DEFAULT false;
ALTER TABLE jobs_archive ADD COLUMN workflow_id bigint,
                         ADD COLUMN waiting_on integer NOT NULL DEFAULT 0,
                         ADD COLUMN failed_on integer NOT NULL DEFAULT 0;
-- A workflow's members (its page, cancelling or retrying it whole). Built under the
-- ALTERs' lock (a scan of both tables): CONCURRENTLY breaks migrations through PgBouncer
-- and beside a second migrator waiting on the advisory lock (a review, issue 39).
CREATE INDEX jobs_workflow_idx ON jobs (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX jobs_archive_workflow_idx ON jobs_archive (workflow_id) WHERE workflow_id IS NOT NULL;

CREATE OR REPLACE VIEW jobs_all AS
    SELECT id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
           timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
           errors, result, cancel_requested_at, unique_key, unique_states,
           workflow_id, waiting_on, failed_on
    FROM jobs
    UNION ALL
    SELECT id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
           timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
           errors, result, cancel_requested_at, unique_key, unique_states,
           workflow_id, waiting_on, failed_on
    FROM jobs_archive;
