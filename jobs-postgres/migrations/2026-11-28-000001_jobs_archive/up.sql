-- The archive: finished jobs leave the hot table `jobs` for `jobs_archive`, so that the
-- claim path, and the autovacuum passes that keep it fast, only ever deal with jobs that
-- wait or run. With every finished job kept in `jobs`, each vacuum pass read the whole
-- table and all its indexes, and the throughput fell by 30 % over 10 M jobs
-- (docs/benchmarks.md, "Sustained"). The archive only grows at its end (ids, finish times
-- and creation times all increase), and vacuum skips its all-visible pages.
--
-- Who moves a job here:
--   - a success, in its completion statement (jobs_postgres::jobs::complete): the row is
--     deleted from `jobs` and inserted here, in one statement;
--   - every other way of finishing (a failure out of attempts, a cancel, a rescue, a
--     duplicate discarded by the scheduler) finishes the row in `jobs`, and the archiver
--     (jobs_core::maintenance::Archiver, on the leader, every second) moves it here;
--   - this migration, for the finished rows already in `jobs`.
-- A retry moves a job back to `jobs` (jobs_postgres::jobs::control).
--
-- One exception: a finished job whose state is one of its unique states holds its
-- uniqueness key, and stays in `jobs` (where jobs_unique_idx sees it) until it is pruned.
-- A key is then held by one index whichever way jobs finish, and an enqueue's
-- ON CONFLICT is decided by it alone.
--
-- To read every job, wherever it is, read the view `jobs_all`. A job is in exactly one
-- of the two tables: each move is one statement.
CREATE TABLE jobs_archive (
    id            bigint      PRIMARY KEY,
    state         job_state   NOT NULL,
    queue         text        NOT NULL,
    kind          text        NOT NULL,
    args          jsonb       NOT NULL,
    meta          jsonb       NOT NULL,
    tags          text[]      NOT NULL,
    priority      smallint    NOT NULL,
    attempt       integer     NOT NULL,
    max_attempts  integer     NOT NULL,
    timeout_ms    bigint,
    created_at    timestamptz NOT NULL,
    scheduled_at  timestamptz NOT NULL,
    attempted_at  timestamptz,
    finalized_at  timestamptz NOT NULL,
    attempted_by  text[]      NOT NULL,
    errors        jsonb       NOT NULL,
    result        jsonb,
    cancel_requested_at timestamptz,
    unique_key    bytea,
    unique_states job_state[],

    -- Also what lets the planner leave this table out of a `jobs_all` query for waiting
    -- or running states (constraint exclusion of a UNION ALL branch).
    CONSTRAINT jobs_archive_finished CHECK (state IN ('completed', 'discarded', 'cancelled'))
);

-- The same reads as the finished-state indexes of `jobs`, over every row here:
-- the pruner and the finished-state filters (and the sort by finish time);
CREATE INDEX jobs_archive_finalized_idx ON jobs_archive (state, finalized_at);
-- the dashboard's created from/to window;
CREATE INDEX jobs_archive_created_idx ON jobs_archive (created_at, id);
-- queue (and queue + state) filters, newest first;
CREATE INDEX jobs_archive_queue_state_idx ON jobs_archive (queue, state, id);
-- containment search in args and meta among failed and cancelled jobs.
CREATE INDEX jobs_archive_search_idx ON jobs_archive
    USING gin (jobs_search_document(args, meta) jsonb_path_ops)
    WHERE state IN ('discarded', 'cancelled');

-- Every job, in either table.
CREATE VIEW jobs_all AS
    SELECT id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
           timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
           errors, result, cancel_requested_at, unique_key, unique_states
    FROM jobs
    UNION ALL
    SELECT id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
           timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
           errors, result, cancel_requested_at, unique_key, unique_states
    FROM jobs_archive;

-- The finished rows already in `jobs` move now, in one statement that takes as long as
-- copying them (on a large table, prune first to make it short).
WITH moved AS (
    DELETE FROM jobs
    WHERE finalized_at IS NOT NULL AND NOT (unique_key IS NOT NULL AND state = ANY (unique_states))
    RETURNING id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
              timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
              errors, result, cancel_requested_at, unique_key, unique_states
)
INSERT INTO jobs_archive (id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
                          timeout_ms, created_at, scheduled_at, attempted_at, finalized_at, attempted_by,
                          errors, result, cancel_requested_at, unique_key, unique_states)
SELECT * FROM moved;

-- The archiver's batch: finished rows of `jobs` that may leave it (not holding a key).
-- Only rows that finished in `jobs` have an entry, and only until they move. (Made after
-- the move above, so that it never holds the rows that just left.)
CREATE INDEX IF NOT EXISTS jobs_archivable_idx ON jobs (id)
    WHERE finalized_at IS NOT NULL AND NOT (unique_key IS NOT NULL AND state = ANY (unique_states));
