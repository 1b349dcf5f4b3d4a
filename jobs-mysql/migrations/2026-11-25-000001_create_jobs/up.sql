-- The jobs schema on MySQL 8 / MariaDB 10.6+. Every statement that reads or writes these
-- tables is in the jobs-mysql crate; each index below names the statement it serves.
--
-- Times are DATETIME(6) in UTC (the driver's sessions run with time_zone '+00:00').
-- JSON columns (args, meta, tags, attempted_by, errors, result) are LONGTEXT holding
-- JSON, readable with JSON_EXTRACT; no CHECK (json_valid()) is spent on them: only
-- jobs-mysql writes them, from serde_json.
--
-- Neither server has partial indexes: the indexes lead with `state` (or `queue, state`)
-- instead, and "unique in these states" is a generated column that holds the key only
-- while the row is in one of them, with a UNIQUE index on it.

CREATE TABLE jobs (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    -- available, scheduled, running, retryable, completed, discarded or cancelled; who
    -- moves a job into each state is documented on jobs_driver::JobState
    state         VARCHAR(16)  NOT NULL DEFAULT 'available',
    queue         VARCHAR(255) NOT NULL DEFAULT 'default',
    kind          VARCHAR(255) NOT NULL,
    args          LONGTEXT     NOT NULL,
    -- free-form context added by the application: request id, user id, ...
    meta          LONGTEXT     NOT NULL,
    -- a JSON array of strings
    tags          LONGTEXT     NOT NULL,
    -- lower runs first
    priority      SMALLINT     NOT NULL DEFAULT 0,
    -- number of times the job has been claimed (snoozes and shutdowns give one back);
    -- also the fence for every write a worker makes about its claim
    attempt       INT          NOT NULL DEFAULT 0,
    max_attempts  INT          NOT NULL DEFAULT 20,
    -- per-attempt time limit; the rescuer also uses it to find jobs stuck past it
    timeout_ms    BIGINT       NULL,
    created_at    DATETIME(6)  NOT NULL,
    scheduled_at  DATETIME(6)  NOT NULL,
    attempted_at  DATETIME(6)  NULL,
    finalized_at  DATETIME(6)  NULL,
    -- a JSON array: one node name per claim, in order
    attempted_by  LONGTEXT     NOT NULL,
    -- the node of the latest claim (the last of attempted_by): the rescuer's join key
    attempted_node VARCHAR(255) NULL,
    -- a JSON array: one object per failed attempt
    errors        LONGTEXT     NOT NULL,
    result        LONGTEXT     NULL,
    -- set by a cancel request: a running job is told through job_notifications and,
    -- whatever its handler then returns short of success, ends cancelled
    cancel_requested_at DATETIME(6) NULL,
    -- sha256 of the uniqueness key, and the states (comma-separated) it is unique in
    unique_key    VARBINARY(32) NULL,
    unique_states VARCHAR(128) NULL,
    -- the key while the row is in one of its unique states, else NULL (UNIQUE ignores NULLs)
    unique_held   VARBINARY(32) AS (IF(FIND_IN_SET(state, unique_states) > 0, unique_key, NULL)) STORED,
    -- the token of the statement that last moved the row (seed 001's lock identifier):
    -- a multi-row UPDATE stamps its rows, and a SELECT by the token reads them back,
    -- where Postgres would say UPDATE … RETURNING
    lock_token    BIGINT       NULL,
    -- the time that matters in the row's state: when it is due (available, scheduled,
    -- retryable), when it was claimed (running), when it finished (the final states).
    -- One index on (state, state_at) serves the scheduler, the rescuer and the pruner,
    -- where three would cost every insert and every state change two more index writes
    -- (about a quarter of enqueue throughput, measured).
    state_at      DATETIME(6)  AS (CASE
                      WHEN state = 'running' THEN attempted_at
                      WHEN state IN ('completed', 'discarded', 'cancelled') THEN finalized_at
                      ELSE scheduled_at END) VIRTUAL,

    -- The one invariant the database enforces, as on Postgres: the pruner and the
    -- dashboard find finished jobs by finalized_at.
    CONSTRAINT jobs_finalized_iff_final CHECK (
        (state IN ('completed', 'discarded', 'cancelled')) = (finalized_at IS NOT NULL)),

    -- jobs::claim: a queue's available jobs in claim order (SKIP LOCKED needs the scan to
    -- follow an index in ORDER BY order).
    KEY jobs_claim_idx (queue, state, priority, scheduled_at, id),
    -- jobs::maintenance::schedule_due, rescue_stuck, release_orphans, prune: a state's
    -- rows by their time.
    KEY jobs_state_at_idx (state, state_at),
    -- jobs::list: a queue's jobs in a state, newest first.
    KEY jobs_queue_state_idx (queue, state, id),
    -- read-backs by token
    KEY jobs_lock_token_idx (lock_token),
    -- jobs::insert: one row per key among the states that hold it
    UNIQUE KEY jobs_unique_idx (unique_held)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Queues known to the cluster: pause flags and settings shared by every node.
CREATE TABLE job_queues (
    name        VARCHAR(255) NOT NULL PRIMARY KEY,
    paused      BOOLEAN      NOT NULL DEFAULT FALSE,
    paused_at   DATETIME(6)  NULL,
    settings    LONGTEXT     NOT NULL,
    created_at  DATETIME(6)  NOT NULL,
    updated_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The leader lease: one row per election name, held until expires_at.
CREATE TABLE job_leaders (
    name        VARCHAR(255) NOT NULL PRIMARY KEY,
    leader_id   VARCHAR(255) NOT NULL,
    elected_at  DATETIME(6)  NOT NULL,
    expires_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per running worker node, refreshed by its heartbeat.
CREATE TABLE job_nodes (
    name          VARCHAR(255) NOT NULL PRIMARY KEY,
    host          VARCHAR(255) NOT NULL,
    pid           INT          NOT NULL,
    started_at    DATETIME(6)  NOT NULL,
    heartbeat_at  DATETIME(6)  NOT NULL,
    -- {"queue": {"limit": 20, "running": 3}, ...}
    queues        LONGTEXT     NOT NULL,
    -- the job kinds the node has registered (a JSON array)
    kinds         LONGTEXT     NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Cron schedules: the durable record of each schedule's last and next slot.
CREATE TABLE job_schedules (
    name           VARCHAR(255) NOT NULL PRIMARY KEY,
    expression     VARCHAR(255) NOT NULL,
    timezone       VARCHAR(64)  NOT NULL DEFAULT 'UTC',
    kind           VARCHAR(255) NOT NULL,
    args           LONGTEXT     NOT NULL,
    -- per-job options for the enqueued jobs (queue, priority, ...)
    options        LONGTEXT     NOT NULL,
    missed_policy  VARCHAR(16)  NOT NULL DEFAULT 'skip' CHECK (missed_policy IN ('skip', 'run_latest')),
    -- switched by people (dashboard, API)
    enabled        BOOLEAN      NOT NULL DEFAULT TRUE,
    -- false once no running node declares the schedule in code
    active         BOOLEAN      NOT NULL DEFAULT TRUE,
    last_run_at    DATETIME(6)  NULL,
    last_job_id    BIGINT       NULL,
    next_run_at    DATETIME(6)  NULL,
    created_at     DATETIME(6)  NOT NULL,
    updated_at     DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Per-minute outcome counters written with each completion batch: the dashboard's
-- throughput chart reads these instead of counting the jobs table.
CREATE TABLE job_stats (
    bucket  DATETIME(6)  NOT NULL,
    queue   VARCHAR(255) NOT NULL,
    state   VARCHAR(16)  NOT NULL,
    count   BIGINT       NOT NULL,
    PRIMARY KEY (bucket, queue, state)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- No LISTEN/NOTIFY: a statement that makes jobs available, cancels a running job or
-- pauses a queue adds a row here in its own transaction (a rollback takes it back); every
-- process's listener reads the rows of the last few seconds each poll. AUTO_INCREMENT ids
-- are assigned before commit, so a row can appear after one with a higher id: listeners
-- re-read a window by time and skip the ids they have seen, rather than trust "past the
-- last id".
CREATE TABLE job_notifications (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    -- jobs_available (payload: the queue) or jobs_control (payload: a JSON message)
    channel     VARCHAR(32)  NOT NULL,
    payload     TEXT         NOT NULL,
    created_at  DATETIME(6)  NOT NULL,
    KEY job_notifications_created_idx (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
