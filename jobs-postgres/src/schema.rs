//! Diesel table definitions for the jobs schema (see `migrations/`).
//!
//! The driver builds its queries from these; applications may read the tables with them
//! too (`jobs_core::postgres::schema` re-exports this module).

#![allow(missing_docs, unreachable_pub)]

/// Postgres types that are not built into diesel.
pub mod sql_types {
    pub use jobs_driver::sql_types::PgJobState as JobState;
}

/// A table (or view) with the columns of `jobs`.
macro_rules! job_table {
    ($(#[$doc:meta])* $name:ident) => {
        diesel::table! {
            use diesel::sql_types::*;
            use super::sql_types::JobState;

            $(#[$doc])*
            $name (id) {
                id -> Int8,
                state -> JobState,
                queue -> Text,
                kind -> Text,
                args -> Jsonb,
                meta -> Jsonb,
                tags -> Array<Text>,
                priority -> Int2,
                attempt -> Int4,
                max_attempts -> Int4,
                timeout_ms -> Nullable<Int8>,
                created_at -> Timestamptz,
                scheduled_at -> Timestamptz,
                attempted_at -> Nullable<Timestamptz>,
                finalized_at -> Nullable<Timestamptz>,
                attempted_by -> Array<Text>,
                errors -> Jsonb,
                result -> Nullable<Jsonb>,
                cancel_requested_at -> Nullable<Timestamptz>,
                unique_key -> Nullable<Bytea>,
                unique_states -> Nullable<Array<JobState>>,
                workflow_id -> Nullable<Int8>,
                waiting_on -> Int4,
                failed_on -> Int4,
            }
        }
    };
}

job_table!(
    /// Jobs that wait or run, and finished jobs not archived yet (or holding their key).
    jobs
);
job_table!(
    /// Finished jobs, moved out of `jobs` (see the migration `jobs_archive`).
    jobs_archive
);
job_table!(
    /// Every job, in `jobs` or in `jobs_archive` (a view: read it, never write it).
    jobs_all
);

diesel::table! {
    job_queues (name) {
        name -> Text,
        paused -> Bool,
        paused_at -> Nullable<Timestamptz>,
        settings -> Jsonb,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        rate_window -> Nullable<Timestamptz>,
        rate_counts -> Nullable<Text>,
    }
}

diesel::table! {
    job_leaders (name) {
        name -> Text,
        leader_id -> Text,
        elected_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    job_nodes (name) {
        name -> Text,
        host -> Text,
        pid -> Int4,
        started_at -> Timestamptz,
        heartbeat_at -> Timestamptz,
        queues -> Jsonb,
        kinds -> Jsonb,
        lock_key -> Nullable<Int8>,
        kind_options -> Jsonb,
    }
}

diesel::table! {
    job_schedules (name) {
        name -> Text,
        expression -> Text,
        timezone -> Text,
        kind -> Text,
        args -> Jsonb,
        options -> Jsonb,
        missed_policy -> Text,
        enabled -> Bool,
        active -> Bool,
        last_run_at -> Nullable<Timestamptz>,
        last_job_id -> Nullable<Int8>,
        next_run_at -> Nullable<Timestamptz>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::sql_types::JobState;

    job_stats (bucket, queue, state) {
        bucket -> Timestamptz,
        queue -> Text,
        state -> JobState,
        count -> Int8,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    jobs,
    jobs_archive,
    jobs_all,
    job_queues,
    job_nodes,
    job_schedules
);
