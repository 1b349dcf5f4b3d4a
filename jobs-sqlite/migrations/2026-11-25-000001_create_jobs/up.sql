-- The jobs schema on SQLite. Every statement that reads or writes these tables is in the
-- jobs-sqlite crate; each index below names the statement it serves.
--
-- Times are INTEGER milliseconds since the Unix epoch (UTC), bound from Rust: SQLite has
-- no timestamp type, and integers compare and add without parsing. To read one:
--   SELECT datetime(scheduled_at / 1000, 'unixepoch') FROM jobs;
-- JSON columns (args, meta, tags, attempted_by, errors, result, unique_states) hold JSON
-- text, readable with SQLite's JSON functions (args ->> '$.user_id').
--
-- Tables are STRICT: a value of the wrong type is an error, not silently kept.

CREATE TABLE jobs (
    -- AUTOINCREMENT: an id is never reused, even after the newest job is deleted, so a
    -- late outcome or a dashboard link never reaches another job.
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    -- available, scheduled, running, retryable, completed, discarded or cancelled; who
    -- moves a job into each state is documented on jobs_driver::JobState. Written only by
    -- jobs-sqlite from the closed JobState enum, and read back through it (an unknown
    -- name is an error on read), so no CHECK spends ~0.6 µs of every insert, claim and
    -- completion on it (measured: the two CHECKs took 40 % of a 100-row insert's CPU).
    state         TEXT    NOT NULL DEFAULT 'available',
    queue         TEXT    NOT NULL DEFAULT 'default',
    kind          TEXT    NOT NULL,
    args          TEXT    NOT NULL DEFAULT '{}',
    -- free-form context added by the application: request id, user id, ...
    meta          TEXT    NOT NULL DEFAULT '{}',
    -- a JSON array of strings
    tags          TEXT    NOT NULL DEFAULT '[]',
    -- lower runs first
    priority      INTEGER NOT NULL DEFAULT 0,
    -- number of times the job has been claimed (snoozes and shutdowns give one back);
    -- also the fence for every write a worker makes about its claim
    attempt       INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL DEFAULT 20,
    -- per-attempt time limit; the rescuer also uses it to find jobs stuck past it
    timeout_ms    INTEGER,
    created_at    INTEGER NOT NULL,
    scheduled_at  INTEGER NOT NULL,
    attempted_at  INTEGER,
    finalized_at  INTEGER,
    -- a JSON array: one node name per claim, in order; the last one runs it now
    attempted_by  TEXT    NOT NULL DEFAULT '[]',
    -- a JSON array: one object per failed attempt
    errors        TEXT    NOT NULL DEFAULT '[]',
    result        TEXT,
    -- set by a cancel request: a running job is told through job_notifications and,
    -- whatever its handler then returns short of success, ends cancelled
    cancel_requested_at INTEGER,
    -- sha256 of the uniqueness key; unique among rows whose state is in unique_states
    -- (a JSON array of state names)
    unique_key    BLOB,
    unique_states TEXT,

    -- The one invariant the database enforces, as on Postgres: the pruner and the
    -- dashboard find finished jobs by finalized_at.
    CONSTRAINT jobs_finalized_iff_final CHECK (
        (state IN ('completed', 'discarded', 'cancelled')) = (finalized_at IS NOT NULL))
) STRICT;

-- Partial indexes: SQLite uses one only when the query repeats its WHERE term, which the
-- statements in jobs-sqlite do.

-- jobs::claim (the claim): available rows in claim order.
CREATE INDEX jobs_claim_idx ON jobs (queue, priority, scheduled_at, id) WHERE state = 'available';
-- jobs::maintenance::schedule_due (the scheduler): scheduled and retryable rows by due time.
CREATE INDEX jobs_due_idx ON jobs (scheduled_at) WHERE state IN ('scheduled', 'retryable');
-- jobs::maintenance::prune (the pruner) and the dashboard's finished-state filters.
CREATE INDEX jobs_finalized_idx ON jobs (state, finalized_at) WHERE finalized_at IS NOT NULL;
-- jobs::maintenance::rescue_stuck (the rescuer) and the dashboard's running list.
CREATE INDEX jobs_running_idx ON jobs (attempted_at) WHERE state = 'running';
-- jobs::list: a queue's jobs in the states they rest in, newest first.
CREATE INDEX jobs_queue_state_idx ON jobs (queue, state, id)
    WHERE state IN ('scheduled', 'retryable', 'completed', 'discarded', 'cancelled');
-- jobs::insert (unique jobs): one row per key among the states that hold it.
CREATE UNIQUE INDEX jobs_unique_idx ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND instr(unique_states, '"' || state || '"') > 0;

-- Queues known to the cluster: pause flags and settings shared by every node.
CREATE TABLE job_queues (
    name        TEXT    PRIMARY KEY,
    paused      INTEGER NOT NULL DEFAULT 0,
    paused_at   INTEGER,
    settings    TEXT    NOT NULL DEFAULT '{}',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

-- The leader lease: one row per election name, held until expires_at.
CREATE TABLE job_leaders (
    name        TEXT    PRIMARY KEY,
    leader_id   TEXT    NOT NULL,
    elected_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;

-- One row per running worker node, refreshed by its heartbeat.
CREATE TABLE job_nodes (
    name          TEXT    PRIMARY KEY,
    host          TEXT    NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL,
    -- {"queue": {"limit": 20, "running": 3}, ...}
    queues        TEXT    NOT NULL DEFAULT '{}',
    -- the job kinds the node has registered (a JSON array), so that the dashboard can say
    -- which live nodes can run a job
    kinds         TEXT    NOT NULL DEFAULT '[]'
) STRICT;

-- Cron schedules: the durable record of each schedule's last and next slot.
CREATE TABLE job_schedules (
    name           TEXT    PRIMARY KEY,
    expression     TEXT    NOT NULL,
    timezone       TEXT    NOT NULL DEFAULT 'UTC',
    kind           TEXT    NOT NULL,
    args           TEXT    NOT NULL DEFAULT 'null',
    -- per-job options for the enqueued jobs (queue, priority, ...)
    options        TEXT    NOT NULL DEFAULT '{}',
    missed_policy  TEXT    NOT NULL DEFAULT 'skip' CHECK (missed_policy IN ('skip', 'run_latest')),
    -- switched by people (dashboard, API)
    enabled        INTEGER NOT NULL DEFAULT 1,
    -- false once no running node declares the schedule in code
    active         INTEGER NOT NULL DEFAULT 1,
    last_run_at    INTEGER,
    last_job_id    INTEGER,
    next_run_at    INTEGER,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
) STRICT;

-- Per-minute outcome counters written with each completion batch: the dashboard's
-- throughput chart reads these instead of counting the jobs table.
CREATE TABLE job_stats (
    bucket  INTEGER NOT NULL,
    queue   TEXT    NOT NULL,
    state   TEXT    NOT NULL,
    count   INTEGER NOT NULL,
    PRIMARY KEY (bucket, queue, state)
) STRICT;

-- SQLite has no LISTEN/NOTIFY. A statement that makes jobs available, cancels a running
-- job or pauses a queue adds a row here in its own transaction (so a rollback takes it
-- back); every process's listener reads the rows past the last id it saw every few tens
-- of milliseconds. SQLite has one writer, so ids are assigned in commit order and "past
-- the last id seen" misses nothing; AUTOINCREMENT keeps them from being reused after the
-- listeners trim old rows.
CREATE TABLE job_notifications (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    -- jobs_available (payload: the queue) or jobs_control (payload: a JSON message)
    channel     TEXT    NOT NULL,
    payload     TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
