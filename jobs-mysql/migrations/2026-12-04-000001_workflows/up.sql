-- Workflows: jobs that wait for other jobs (docs/design/workflows.md). Every statement
-- that reads or writes these tables is in jobs-mysql/src/workflows.rs; the rules are
-- jobs_driver::workflow's. The columns and their meaning are Postgres's (see its
-- migration `workflows`).

CREATE TABLE job_workflows (
    id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name        VARCHAR(255) NOT NULL,
    -- 'cancel' or 'hold'
    on_failure  VARCHAR(8)   NOT NULL,
    -- a batch's callback (NULL: a workflow), and when the batch was sealed (NULL: members
    -- may still join)
    callback_id BIGINT       NULL,
    sealed_at   DATETIME(6)  NULL,
    created_at  DATETIME(6)  NOT NULL
);

CREATE TABLE job_dependencies (
    depends_on BIGINT      NOT NULL,
    job_id     BIGINT      NOT NULL,
    -- the dependency's kind, for the dependent's typed read of its result
    kind       VARCHAR(255) NOT NULL,
    -- 'completed' or 'finished'
    needs      VARCHAR(16) NOT NULL,
    outcome    VARCHAR(16) NULL,
    result     LONGTEXT    NULL,
    PRIMARY KEY (depends_on, job_id),
    KEY job_dependencies_job_idx (job_id),
    -- No partial indexes: the unsettled edges are those under `outcome IS NULL` here.
    KEY job_dependencies_unsettled_idx (outcome, depends_on)
);

-- Added at the end of the row: instant on MySQL 8.0.29+ and MariaDB 10.3+, whatever the
-- table's size. The index is built online (writes go on meanwhile).
ALTER TABLE jobs ADD COLUMN workflow_id BIGINT NULL,
                 ADD COLUMN waiting_on INT NOT NULL DEFAULT 0,
                 ADD COLUMN failed_on INT NOT NULL DEFAULT 0;
CREATE INDEX jobs_workflow_idx ON jobs (workflow_id);

-- The view lists the columns `jobs` had when it was made: made again, it has the new ones.
CREATE OR REPLACE VIEW jobs_all AS SELECT * FROM jobs;
