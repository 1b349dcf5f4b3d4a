//! Every statement on the `jobs` table.

/// Whether job `$j` (a row with `id`, `unique_key`, `unique_states`) would break its
/// uniqueness by becoming available: another row holds its key in that row's own unique
/// states. (The terms repeat `jobs_unique_idx`'s predicate, so the lookup uses it.)
macro_rules! key_held_by_another {
    ($j:literal) => {
        concat!(
            "(",
            $j,
            ".unique_key IS NOT NULL AND 'available' = ANY (",
            $j,
            ".unique_states) AND EXISTS (
                SELECT 1 FROM jobs o WHERE o.unique_key = ",
            $j,
            ".unique_key AND o.unique_key IS NOT NULL
                  AND o.state = ANY (o.unique_states) AND o.id <> ",
            $j,
            ".id))"
        )
    };
}

/// Whether the workflow of job `$j` holds its dependents when a dependency fails them
/// (else it cancels them; a job in no workflow has no dependency).
macro_rules! holds_on_failure {
    ($j:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM job_workflows w WHERE w.id = ",
            $j,
            ".workflow_id AND w.on_failure = 'hold')"
        )
    };
}

/// The error entry (a one-element `jsonb` array, `[]` where none) of job `$j` cancelled
/// because a dependency failed it, at `$now`: the first such dependency, as
/// `jobs_driver::workflow::dependency_failed_entry` writes it.
macro_rules! failed_dependency_entry {
    ($j:literal, $now:literal) => {
        concat!(
            "COALESCE((SELECT jsonb_build_array(jsonb_build_object('attempt', 0, 'at', ",
            $now,
            ", 'error_type', 'dependency_failed',
                'message', 'dependency ' || d.depends_on || ' ended ' || d.outcome::text, 'dependency', d.depends_on))
             FROM job_dependencies d
             WHERE d.job_id = ",
            $j,
            ".id AND d.needs = 'completed' AND d.outcome <> 'completed'
             ORDER BY d.depends_on LIMIT 1), '[]'::jsonb)"
        )
    };
}

pub(crate) mod archive;
pub(crate) mod claim;
pub(crate) mod complete;
pub(crate) mod control;
pub(crate) mod due;
mod estimate;
pub(crate) mod insert;
pub(crate) mod insert_full;
mod insert_rounds;
pub(crate) mod list;
pub(crate) mod maintenance;
pub(crate) mod page;
pub(crate) mod prune;
pub(crate) mod read;
