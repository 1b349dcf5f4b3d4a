//! The statements of the workflow store (see the parent module), one per step of the rules.

/// `JSON_TABLE` of the ids in `$n` (a JSON array), as table `$alias` with column `id`.
macro_rules! ids {
    ($n:literal, $alias:literal) => {
        concat!("JSON_TABLE(", $n, ", '$[*]' COLUMNS (id BIGINT PATH '$')) AS ", $alias)
    };
}

pub(crate) const DEPENDENCY_STATES: &str = concat!(
    "SELECT j.id, j.kind, j.state, j.result FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN jobs j ON j.id = t.id"
);

pub(crate) const INSERT_WORKFLOW: &str =
    "INSERT INTO job_workflows (name, on_failure, created_at) VALUES ($1, $2, UTC_TIMESTAMP(6))";

// One JSON array per edge (`jobs_driver::workflow::edges_json`).
pub(crate) const INSERT_EDGES: &str = "\
INSERT INTO job_dependencies (depends_on, job_id, kind, needs, outcome, result)
SELECT e.depends_on, e.job_id, e.kind, e.needs, e.outcome, e.result
FROM JSON_TABLE($1, '$[*]' COLUMNS (depends_on BIGINT PATH '$[0]', job_id BIGINT PATH '$[1]',
                                   kind VARCHAR(255) PATH '$[2]', needs VARCHAR(16) PATH '$[3]',
                                   outcome VARCHAR(16) PATH '$[4]', result LONGTEXT PATH '$[5]')) AS e";

pub(crate) const DEPENDENTS_UNSETTLED: &str = concat!(
    "SELECT DISTINCT d.job_id AS id FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_dependencies d ON d.outcome IS NULL AND d.depends_on = t.id ORDER BY d.job_id LIMIT $2"
);
pub(crate) const DEPENDENTS_SETTLED: &str = concat!(
    "SELECT DISTINCT d.job_id AS id FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_dependencies d ON d.depends_on = t.id WHERE d.outcome IS NOT NULL ORDER BY d.job_id LIMIT $2"
);

// Locks only the jobs (the workflows' settings, which never change, are read after).
pub(crate) const LOCK: &str = "\
SELECT j.id, j.state, j.waiting_on, j.failed_on, j.workflow_id FROM jobs j
WHERE j.id IN (SELECT t.id FROM JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)
ORDER BY j.id FOR UPDATE";
pub(crate) const SETTINGS: &str = concat!(
    "SELECT w.id, w.on_failure FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN job_workflows w ON w.id = t.id"
);

pub(crate) const EDGES_UNSETTLED: &str = "\
SELECT d.depends_on, d.job_id, d.kind, d.needs, d.outcome, d.result FROM job_dependencies d
WHERE d.depends_on IN (SELECT t.id FROM JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)
  AND d.job_id IN (SELECT u.id FROM JSON_TABLE($2, '$[*]' COLUMNS (id BIGINT PATH '$')) AS u)
  AND d.outcome IS NULL FOR UPDATE";
pub(crate) const EDGES_SETTLED: &str = "\
SELECT d.depends_on, d.job_id, d.kind, d.needs, d.outcome, d.result FROM job_dependencies d
WHERE d.depends_on IN (SELECT t.id FROM JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t)
  AND d.job_id IN (SELECT u.id FROM JSON_TABLE($2, '$[*]' COLUMNS (id BIGINT PATH '$')) AS u)
  AND d.outcome IS NOT NULL FOR UPDATE";

pub(crate) const SET_OUTCOME: &str = concat!(
    "UPDATE ",
    ids!("$2", "t"),
    " STRAIGHT_JOIN job_dependencies d ON d.depends_on = $1 AND d.job_id = t.id
SET d.outcome = $3, d.result = $4"
);

pub(crate) const DELETE_EDGES_INTO: &str =
    concat!("DELETE d FROM ", ids!("$1", "t"), " STRAIGHT_JOIN job_dependencies d ON d.job_id = t.id");

/// `UPDATE` of the jobs `$1` with `$set` and the counters (`$2`, `$3`) and workflow (`$4`).
macro_rules! update {
    ($set:literal, $where:literal) => {
        concat!(
            "UPDATE ",
            ids!("$1", "t"),
            " STRAIGHT_JOIN jobs j ON j.id = t.id SET ",
            $set,
            "j.waiting_on = $2, j.failed_on = $3, j.workflow_id = COALESCE($4, j.workflow_id)",
            $where
        )
    };
}

pub(crate) const SET_COUNTERS: &str = update!("", "");
pub(crate) const PEND: &str = update!(
    "j.state = 'pending', j.finalized_at = NULL, j.cancel_requested_at = NULL, ",
    " WHERE j.state <> 'running'"
);
pub(crate) const RELEASED_QUEUES: &str = concat!(
    "SELECT DISTINCT j.queue FROM ",
    ids!("$1", "t"),
    " STRAIGHT_JOIN jobs j ON j.id = t.id
WHERE j.state = 'pending' AND j.scheduled_at <= COALESCE($2, UTC_TIMESTAMP(6))"
);
pub(crate) const RELEASE: &str = update!(
    "j.state = IF(j.scheduled_at > COALESCE($5, UTC_TIMESTAMP(6)), 'scheduled', 'available'), ",
    " WHERE j.state = 'pending'"
);
pub(crate) const CANCEL: &str = update!(
    "j.state = 'cancelled', j.finalized_at = COALESCE($5, UTC_TIMESTAMP(6)),
     j.errors = JSON_MERGE_PRESERVE(j.errors, CONCAT('[', $6, ']')), ",
    " WHERE j.state IN ('pending', 'available', 'scheduled')"
);

pub(crate) const FINISHED_WITH_UNSETTLED: &str = "\
SELECT d.depends_on AS id
FROM (SELECT DISTINCT depends_on FROM job_dependencies WHERE outcome IS NULL) AS d
WHERE COALESCE((SELECT j.state IN ('completed', 'discarded', 'cancelled') FROM jobs j WHERE j.id = d.depends_on),
               true)
ORDER BY d.depends_on LIMIT $1";

pub(crate) const DEPENDENCIES: &str = "\
SELECT depends_on, job_id, kind, needs, outcome, result FROM job_dependencies
WHERE job_id = $1 ORDER BY depends_on";
