//! The statements of the workflow store (see the parent module), one per step of the rules.

use crate::notifications::available_channel;

pub(crate) const DEPENDENCY_STATES: &str = "SELECT id, kind, state, result FROM jobs_all WHERE id = ANY ($1)";

/// A share lock on the jobs `$1` in one table or the other, reading their states.
macro_rules! lock_dependencies {
    ($table:literal, $skip:literal) => {
        concat!(
            "SELECT id, kind, state, result FROM ",
            $table,
            " WHERE id = ANY ($1) ORDER BY id FOR SHARE",
            $skip
        )
    };
}

pub(crate) const LOCK_DEPENDENCIES_HOT: [&str; 2] =
    [lock_dependencies!("jobs", ""), lock_dependencies!("jobs", " SKIP LOCKED")];
pub(crate) const LOCK_DEPENDENCIES_ARCHIVED: [&str; 2] =
    [lock_dependencies!("jobs_archive", ""), lock_dependencies!("jobs_archive", " SKIP LOCKED")];

/// Locks the jobs `$1` in `jobs` in id order and marks the unfinished ones depended on;
/// their states. Only an unfinished job not marked yet is written: a row lock alone makes
/// no enqueue of the same uniqueness key wait, a write until it commits would.
pub(crate) const MARK_DEPENDENCIES: &str = "\
WITH locked AS (
    SELECT id, kind, state, result, depended_on FROM jobs WHERE id = ANY ($1) ORDER BY id FOR NO KEY UPDATE
), marked AS (
    UPDATE jobs SET depended_on = true FROM locked
    WHERE jobs.id = locked.id AND NOT locked.depended_on
      AND locked.state NOT IN ('completed', 'discarded', 'cancelled')
)
SELECT id, kind, state, result FROM locked";

/// Which of `$1` exist (after a lock left some out: they moved between the tables).
pub(crate) const EXISTING: &str = "SELECT id FROM jobs_all WHERE id = ANY ($1)";

pub(crate) const INSERT_WORKFLOW: &str =
    "INSERT INTO job_workflows (name, on_failure) VALUES ($1, $2) RETURNING id";

pub(crate) const LOCK_WORKFLOW: &str =
    "SELECT callback_id, sealed_at IS NOT NULL AS sealed FROM job_workflows WHERE id = $1 FOR UPDATE";
pub(crate) const SET_BATCH: &str = "\
UPDATE job_workflows
SET callback_id = $2, sealed_at = CASE WHEN $3 THEN COALESCE(sealed_at, now()) ELSE sealed_at END
WHERE id = $1";

pub(crate) const INSERT_EDGES: &str = "\
INSERT INTO job_dependencies (depends_on, job_id, kind, needs, outcome, result)
SELECT u.depends_on, u.job_id, u.kind, u.needs, u.outcome::job_state, u.result
FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::jsonb[])
     AS u(depends_on, job_id, kind, needs, outcome, result)";

// Two statements, so that the unsettled one reads `job_dependencies_unsettled_idx`.
pub(crate) const DEPENDENTS_UNSETTLED: &str = "\
SELECT DISTINCT job_id AS id FROM job_dependencies
WHERE depends_on = ANY ($1) AND outcome IS NULL ORDER BY job_id LIMIT $2";
pub(crate) const DEPENDENTS_SETTLED: &str = "\
SELECT DISTINCT job_id AS id FROM job_dependencies
WHERE depends_on = ANY ($1) AND outcome IS NOT NULL ORDER BY job_id LIMIT $2";

// The lock, then the read in a statement of its own: in the same statement, the read's
// snapshot would predate a lock it waited for, and show counters from before it.
pub(crate) const LOCK_HOT: [&str; 2] = [
    "SELECT id FROM jobs WHERE id = ANY ($1) ORDER BY id FOR UPDATE",
    "SELECT id FROM jobs WHERE id = ANY ($1) ORDER BY id FOR UPDATE SKIP LOCKED",
];
pub(crate) const LOCK_ARCHIVED: [&str; 2] = [
    "SELECT id FROM jobs_archive WHERE id = ANY ($1) ORDER BY id FOR UPDATE",
    "SELECT id FROM jobs_archive WHERE id = ANY ($1) ORDER BY id FOR UPDATE SKIP LOCKED",
];
pub(crate) const READ_LOCKED: &str = "\
SELECT j.id, j.state, j.waiting_on, j.failed_on,
       COALESCE((SELECT w.on_failure FROM job_workflows w WHERE w.id = j.workflow_id), 'cancel') AS on_failure,
       COALESCE(j.errors -> -1 ->> 'error_type' = 'dependency_failed', false) AND j.cancel_requested_at IS NULL
           AS cancelled_by_dependency
FROM jobs_all j
WHERE j.id = ANY ($1) ORDER BY j.id";

pub(crate) const EDGES_UNSETTLED: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE depends_on = ANY ($1) AND job_id = ANY ($2) AND outcome IS NULL";
pub(crate) const EDGES_SETTLED: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE depends_on = ANY ($1) AND job_id = ANY ($2) AND outcome IS NOT NULL";

pub(crate) const SETTLED_EDGES_INTO: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE job_id = ANY ($1) AND outcome IS NOT NULL";

pub(crate) const SET_OUTCOME: &str = "\
UPDATE job_dependencies d SET outcome = $3::text::job_state, result = $4
FROM unnest($1::int8[], $2::int8[]) AS e(depends_on, job_id)
WHERE d.depends_on = e.depends_on AND d.job_id = e.job_id";

// The edges into those of `$1` that a delete removed (not those it left: running).
pub(crate) const DELETE_EDGES_INTO_GONE: &str = "\
DELETE FROM job_dependencies d
WHERE d.job_id = ANY ($1) AND NOT EXISTS (SELECT 1 FROM jobs_all j WHERE j.id = d.job_id)";

pub(crate) const DELETE_EDGES_INTO: &str = "DELETE FROM job_dependencies WHERE job_id = ANY ($1)";

/// The counters (`$2`, `$3`) and workflow (`$4` when not null) of the jobs `$1`, in one
/// table or the other.
macro_rules! set_counters {
    ($table:literal) => {
        concat!(
            "UPDATE ",
            $table,
            " SET waiting_on = $2, failed_on = $3, workflow_id = COALESCE($4, workflow_id) WHERE id = ANY ($1)"
        )
    };
}

pub(crate) const SET_COUNTERS_HOT: &str = set_counters!("jobs");
pub(crate) const SET_COUNTERS_ARCHIVED: &str = set_counters!("jobs_archive");

pub(crate) const PEND_HOT: &str = "\
UPDATE jobs SET state = 'pending', finalized_at = NULL, cancel_requested_at = NULL,
                waiting_on = $2, failed_on = $3, workflow_id = COALESCE($4, workflow_id)
WHERE id = ANY ($1) AND state <> 'running'";

pub(crate) const PEND_ARCHIVED: &str = concat!(
    "\
WITH back AS (DELETE FROM jobs_archive WHERE id = ANY ($1) RETURNING *)
INSERT INTO jobs (",
    crate::jobs::archive::job_columns!(),
    ")
SELECT id, 'pending', queue, kind, args, meta, tags, priority, attempt, max_attempts, timeout_ms,
       created_at, scheduled_at, attempted_at, NULL, attempted_by, errors, result, NULL,
       unique_key, unique_states, COALESCE($4, workflow_id), $2, $3
FROM back"
);

pub(crate) const RELEASE: &str = concat!(
    "\
WITH released AS (
    UPDATE jobs
    SET state = CASE WHEN scheduled_at > COALESCE($5::timestamptz, now()) THEN 'scheduled'::job_state
                     ELSE 'available' END,
        waiting_on = $2, failed_on = $3, workflow_id = COALESCE($4, workflow_id)
    WHERE id = ANY ($1) AND state = 'pending'
    RETURNING queue, state
), woken AS (
    SELECT pg_notify('",
    available_channel!(),
    "', queue) FROM (SELECT DISTINCT queue FROM released WHERE state = 'available') AS q
)
SELECT count(*) AS n FROM woken"
);

pub(crate) const CANCEL: &str = "\
UPDATE jobs
SET state = 'cancelled', finalized_at = COALESCE($5::timestamptz, now()), errors = errors || $6::jsonb,
    waiting_on = $2, failed_on = $3, workflow_id = COALESCE($4, workflow_id)
WHERE id = ANY ($1) AND state IN ('pending', 'available', 'scheduled')";

// A page of the unsettled edges (their index, from the cursor `$1` on), each dependency
// once, looked up by primary key in `jobs` (a subquery per dependency: as a join, the
// planner, which cannot know how few dependencies there are, may hash the whole of
// `jobs`): one there unfinished is not finished; one finished there, or not there (in the
// archive, or gone), is a candidate, which the settle reads again through `jobs_all`.
pub(crate) const FINISHED_WITH_UNSETTLED: &str = "\
SELECT d.depends_on AS id,
       COALESCE((SELECT j.state IN ('completed', 'discarded', 'cancelled') FROM jobs j WHERE j.id = d.depends_on),
                true) AS finished
FROM (SELECT DISTINCT depends_on FROM job_dependencies
      WHERE outcome IS NULL AND depends_on > $1 ORDER BY depends_on LIMIT $2) AS d
ORDER BY d.depends_on";

pub(crate) const DEPENDENCIES: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE job_id = $1 ORDER BY depends_on";

/// The workflows of the jobs `$1`, wherever they are: before a person's delete, those it
/// may empty.
pub(crate) const WORKFLOWS_OF: &str = "\
SELECT DISTINCT workflow_id AS id FROM jobs_all WHERE id = ANY ($1) AND workflow_id IS NOT NULL ORDER BY id";

/// Of the workflows `$1`, deletes those no member is left in (`jobs` or the archive):
/// never a batch that may still take members (unsealed), nor a row another transaction
/// holds (skipped). Locks only the empty rows it deletes (a closed workflow never gains a
/// member: the statement's snapshot holds).
pub(crate) const DELETE_EMPTY_WORKFLOWS: &str = "\
DELETE FROM job_workflows
WHERE id IN (SELECT w.id FROM job_workflows w
             WHERE w.id = ANY ($1) AND (w.callback_id IS NULL OR w.sealed_at IS NOT NULL)
               AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.workflow_id = w.id)
               AND NOT EXISTS (SELECT 1 FROM jobs_archive a WHERE a.workflow_id = w.id)
             ORDER BY w.id FOR UPDATE SKIP LOCKED)";
