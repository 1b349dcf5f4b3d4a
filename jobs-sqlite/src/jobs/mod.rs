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

pub(crate) mod claim;
pub(crate) mod complete;
pub(crate) mod control;
pub(crate) mod insert;
pub(crate) mod insert_full;
pub(crate) mod list;
pub(crate) mod maintenance;
pub(crate) mod prune;
pub(crate) mod read;
