-- Workflows: jobs that wait for other jobs (docs/design/workflows.md). Every statement
-- that reads or writes these tables is in jobs-sqlite/src/workflows.rs; the rules are
-- jobs_driver::workflow's. The columns and their meaning are Postgres's (see its
-- migration `workflows`).

CREATE TABLE job_workflows (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    on_failure  TEXT    NOT NULL CHECK (on_failure IN ('cancel', 'hold')),
    -- a batch's callback (NULL: a workflow), and when the batch was sealed (ms; NULL:
    -- members may still join)
    callback_id INTEGER,
    sealed_at   INTEGER,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE job_dependencies (
    depends_on INTEGER NOT NULL,
    job_id     INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    needs      TEXT    NOT NULL CHECK (needs IN ('completed', 'finished')),
    outcome    TEXT,
    result     TEXT,
    PRIMARY KEY (depends_on, job_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX job_dependencies_job_idx ON job_dependencies (job_id);
CREATE INDEX job_dependencies_unsettled_idx ON job_dependencies (depends_on) WHERE outcome IS NULL;

ALTER TABLE jobs ADD COLUMN workflow_id INTEGER;
ALTER TABLE jobs ADD COLUMN waiting_on INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN failed_on INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_workflow_idx ON jobs (workflow_id) WHERE workflow_id IS NOT NULL;
