//! Every statement on the `jobs` table, by what it is for.

pub(crate) mod claim;
pub(crate) mod complete;
pub(crate) mod control;
pub(crate) mod insert;
pub(crate) mod insert_full;
mod insert_sql;
pub(crate) mod list;
pub(crate) mod maintenance;
pub(crate) mod read;
