//! The statements of the workflow store (see the parent module), one per step of the rules.

pub(crate) const DEPENDENCY_STATES: &str =
    "SELECT id, kind, state, result FROM jobs WHERE id IN (SELECT value FROM json_each($1))";

pub(crate) const INSERT_WORKFLOW: &str =
    "INSERT INTO job_workflows (name, on_failure, created_at) VALUES ($1, $2, $3) RETURNING id";

// One JSON array per edge (`jobs_driver::workflow::edges_json`).
pub(crate) const LOCK_WORKFLOW: &str =
    "SELECT callback_id, sealed_at IS NOT NULL AS sealed FROM job_workflows WHERE id = $1";
pub(crate) const SET_BATCH: &str = "\
UPDATE job_workflows SET callback_id = $2, sealed_at = CASE WHEN $3 THEN COALESCE(sealed_at, $4) ELSE sealed_at END
WHERE id = $1";

pub(crate) const INSERT_EDGES: &str = "\
INSERT INTO job_dependencies (depends_on, job_id, kind, needs, outcome, result)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]')
FROM json_each($1)";

pub(crate) const DEPENDENTS_UNSETTLED: &str = "\
SELECT DISTINCT job_id AS id FROM job_dependencies
WHERE depends_on IN (SELECT value FROM json_each($1)) AND outcome IS NULL ORDER BY job_id LIMIT $2";
pub(crate) const DEPENDENTS_SETTLED: &str = "\
SELECT DISTINCT job_id AS id FROM job_dependencies
WHERE depends_on IN (SELECT value FROM json_each($1)) AND outcome IS NOT NULL ORDER BY job_id LIMIT $2";

pub(crate) const READ_LOCKED: &str = "\
SELECT j.id, j.state, j.waiting_on, j.failed_on,
       COALESCE((SELECT w.on_failure FROM job_workflows w WHERE w.id = j.workflow_id), 'cancel') AS on_failure,
       COALESCE(json_extract(j.errors, '$[#-1].error_type') = 'dependency_failed', 0) AND j.cancel_requested_at IS NULL
           AS cancelled_by_dependency
FROM jobs j
WHERE j.id IN (SELECT value FROM json_each($1)) ORDER BY j.id";

pub(crate) const EDGES_UNSETTLED: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE depends_on IN (SELECT value FROM json_each($1)) AND job_id IN (SELECT value FROM json_each($2))
  AND outcome IS NULL";
pub(crate) const EDGES_SETTLED: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE depends_on IN (SELECT value FROM json_each($1)) AND job_id IN (SELECT value FROM json_each($2))
  AND outcome IS NOT NULL";

pub(crate) const SETTLED_EDGES_INTO: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE job_id IN (SELECT value FROM json_each($1)) AND outcome IS NOT NULL";

// `$1`: a JSON array of `[depends_on, job_id]` pairs.
pub(crate) const SET_OUTCOME: &str = "\
UPDATE job_dependencies SET outcome = $2, result = $3
WHERE (depends_on, job_id) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($1))";

// The edges into those of `$1` that a delete removed (not those it left: running).
pub(crate) const DELETE_EDGES_INTO_GONE: &str = "\
DELETE FROM job_dependencies
WHERE job_id IN (SELECT value FROM json_each($1)) AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = job_id)";

pub(crate) const DELETE_EDGES_INTO: &str =
    "DELETE FROM job_dependencies WHERE job_id IN (SELECT value FROM json_each($1))";

pub(crate) const SET_COUNTERS: &str = "\
UPDATE jobs SET waiting_on = $2, failed_on = $3, workflow_id = COALESCE($4, workflow_id)
WHERE id IN (SELECT value FROM json_each($1))";

pub(crate) const PEND: &str = "\
UPDATE jobs SET state = 'pending', finalized_at = NULL, cancel_requested_at = NULL,
                waiting_on = $2, failed_on = $3, workflow_id = COALESCE($4, workflow_id)
WHERE id IN (SELECT value FROM json_each($1)) AND state <> 'running'";

pub(crate) const RELEASE: &str = "\
UPDATE jobs SET state = CASE WHEN scheduled_at > $5 THEN 'scheduled' ELSE 'available' END,
                waiting_on = $2, failed_on = $3, workflow_id = COALESCE($4, workflow_id)
WHERE id IN (SELECT value FROM json_each($1)) AND state = 'pending'
RETURNING queue, state";

pub(crate) const CANCEL: &str = "\
UPDATE jobs SET state = 'cancelled', finalized_at = $5, errors = json_insert(errors, '$[#]', json($6)),
                waiting_on = $2, failed_on = $3, workflow_id = COALESCE($4, workflow_id)
WHERE id IN (SELECT value FROM json_each($1)) AND state IN ('pending', 'available', 'scheduled')";

// A page of the unsettled edges (their index, from the cursor `$1` on), each dependency
// once, looked up by primary key.
pub(crate) const FINISHED_WITH_UNSETTLED: &str = "\
SELECT d.depends_on AS id,
       COALESCE((SELECT j.state IN ('completed', 'discarded', 'cancelled') FROM jobs j WHERE j.id = d.depends_on),
                1) AS finished
FROM (SELECT DISTINCT depends_on FROM job_dependencies
      WHERE outcome IS NULL AND depends_on > $1 ORDER BY depends_on LIMIT $2) AS d
ORDER BY d.depends_on";

pub(crate) const DEPENDENCIES: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE job_id = $1 ORDER BY depends_on";

/// The workflows of the jobs `$1` (a JSON array of ids): before a person's delete, those
/// it may empty.
pub(crate) const WORKFLOWS_OF: &str = "SELECT DISTINCT workflow_id AS id FROM jobs \
     WHERE id IN (SELECT value FROM json_each($1)) AND workflow_id IS NOT NULL ORDER BY 1";

/// Of the workflows `$1` (a JSON array of ids), deletes those no member is left in, but
/// a batch that may still take members (unsealed), as on every backend (one writer holds
/// the file: no row is another's).
pub(crate) const DELETE_EMPTY_WORKFLOWS: &str = "\
DELETE FROM job_workflows WHERE id IN (SELECT value FROM json_each($1))
  AND (callback_id IS NULL OR sealed_at IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.workflow_id = job_workflows.id)";
