//! Every statement on the `jobs` table, by what it is for.

/// `jobs j` for the ids of the JSON array `$1` (made by `read::ids_json`), found by
/// primary key.
macro_rules! by_ids {
    () => {
        "JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = t.id"
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
