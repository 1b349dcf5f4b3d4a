//! Every statement on the `jobs` table, by what it is for.

/// `jobs j` for the ids of the JSON array `$1` (made by `read::ids_json`), found by
/// primary key.
macro_rules! by_ids {
    () => {
        "JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = t.id"
    };
}

/// Whether the workflow of job `j` holds its dependents when a dependency fails them (else
/// it cancels them; a job in no workflow has no dependency).
macro_rules! holds_on_failure {
    () => {
        "EXISTS (SELECT 1 FROM job_workflows w FORCE INDEX (PRIMARY) WHERE w.id = j.workflow_id AND w.on_failure = 'hold')"
    };
}

/// The error entry (a one-element JSON array, `[]` where none) of job `j` cancelled
/// because a dependency failed it, at `$at`: the first such dependency, as
/// `jobs_driver::workflow::dependency_failed_entry` writes it.
macro_rules! failed_dependency_entry {
    ($at:literal) => {
        concat!(
            "COALESCE((SELECT JSON_ARRAY(JSON_OBJECT('attempt', 0, 'at', DATE_FORMAT(",
            $at,
            ", '%Y-%m-%dT%H:%i:%s.%fZ'), 'error_type', 'dependency_failed',
                'message', CONCAT('dependency ', d.depends_on, ' ended ', d.outcome), 'dependency', d.depends_on))
             FROM job_dependencies d FORCE INDEX (job_dependencies_job_idx)
             WHERE d.job_id = j.id AND d.needs = 'completed' AND d.outcome <> 'completed'
             ORDER BY d.depends_on LIMIT 1), JSON_ARRAY())"
        )
    };
}

/// Whether job `j` would break its uniqueness by becoming available: its key is unique in
/// `available`, and another row holds it (`unique_held`, the key of a row in one of its
/// own unique states, found through the unique index). A macro, for `concat!`.
macro_rules! key_held_by_another {
    () => {
        "(j.unique_key IS NOT NULL AND FIND_IN_SET('available', j.unique_states) > 0
          AND EXISTS (SELECT 1 FROM jobs o WHERE o.unique_held = j.unique_key AND o.id <> j.id))"
    };
}

pub(crate) mod claim;
pub(crate) mod complete;
pub(crate) mod control;
pub(crate) mod due;
pub(crate) mod insert;
mod insert_batch;
pub(crate) mod insert_full;
mod insert_read_back;
mod insert_sql;
pub(crate) mod list;
pub(crate) mod maintenance;
pub(crate) mod prune;
pub(crate) mod read;
