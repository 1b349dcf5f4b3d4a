//! Every statement on the `jobs` table, by what it is for.

/// `jobs j` for the ids of the JSON array `$1` (made by `read::ids_json`), found by
/// primary key.
macro_rules! by_ids {
    () => {
        "JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t STRAIGHT_JOIN jobs j ON j.id = t.id"
    };
}

pub(crate) mod claim;
pub(crate) mod complete;
pub(crate) mod control;
pub(crate) mod insert;
mod insert_batch;
pub(crate) mod insert_full;
mod insert_read_back;
mod insert_sql;
pub(crate) mod list;
pub(crate) mod maintenance;
pub(crate) mod read;
