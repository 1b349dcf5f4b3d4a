//! Every statement on the `jobs` table, by what it is for.

/// Whether job `$j` (a row with `id`, `unique_key`, `unique_states`) would break its
/// uniqueness by becoming available: another row holds its key in that row's own unique
/// states. (The terms repeat `jobs_unique_idx`'s predicate, so the lookup uses it.)
macro_rules! key_held_by_another {
    ($j:literal) => {
        concat!(
            "(",
            $j,
            ".unique_key IS NOT NULL AND instr(",
            $j,
            ".unique_states, '\"available\"') > 0 AND EXISTS (
                SELECT 1 FROM jobs o WHERE o.unique_key = ",
            $j,
            ".unique_key AND o.unique_key IS NOT NULL
                  AND instr(o.unique_states, '\"' || o.state || '\"') > 0 AND o.id <> ",
            $j,
            ".id))"
        )
    };
}

/// Whether the workflow of the row being updated (`jobs`) holds its dependents when a
/// dependency fails them (else it cancels them; a job in no workflow has no dependency).
macro_rules! holds_on_failure {
    () => {
        "EXISTS (SELECT 1 FROM job_workflows w WHERE w.id = jobs.workflow_id AND w.on_failure = 'hold')"
    };
}

/// `$errors` (a JSON array) with, for the row being updated (`jobs`) cancelled because a
/// dependency failed it, the entry naming the first such dependency at `$at` (a JSON
/// value), as `jobs_driver::workflow::dependency_failed_entry` writes it.
macro_rules! with_failed_dependency_entry {
    ($errors:expr, $at:literal) => {
        concat!(
            "COALESCE((SELECT json_insert(",
            $errors,
            ", '$[#]', json_object('attempt', 0, 'at', json(",
            $at,
            "), 'error_type', 'dependency_failed',
                'message', 'dependency ' || d.depends_on || ' ended ' || d.outcome, 'dependency', d.depends_on))
             FROM job_dependencies d
             WHERE d.job_id = jobs.id AND d.needs = 'completed' AND d.outcome <> 'completed'
             ORDER BY d.depends_on LIMIT 1), ",
            $errors,
            ")"
        )
    };
}

pub(crate) mod claim;
pub(crate) mod complete;
pub(crate) mod control;
pub(crate) mod due;
pub(crate) mod insert;
pub(crate) mod insert_full;
pub(crate) mod list;
pub(crate) mod maintenance;
pub(crate) mod prune;
pub(crate) mod read;
