//! Every statement on the `jobs` table.

pub(crate) mod archive;
pub(crate) mod claim;
pub(crate) mod complete;
pub(crate) mod control;
pub(crate) mod insert;
pub(crate) mod insert_full;
pub(crate) mod list;
pub(crate) mod maintenance;
pub(crate) mod page;
pub(crate) mod read;
