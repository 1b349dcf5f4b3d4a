//! The SQL types of the backends' schemas that diesel does not provide (feature
//! `postgres`), named here so that [`JobState`](crate::JobState) can be written and read
//! in diesel queries (only the crate defining a type may implement diesel's expression
//! traits for it).

/// The Postgres `job_state` enum.
#[derive(diesel::sql_types::SqlType, diesel::query_builder::QueryId, Debug, Clone, Copy)]
#[diesel(postgres_type(name = "job_state"))]
pub struct PgJobState;
