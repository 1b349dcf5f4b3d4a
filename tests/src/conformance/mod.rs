//! The conformance suite: every behaviour of the runtime, written once against the
//! [`Driver`] seam and run per backend with [`conformance_suite!`](crate::conformance_suite).
//!
//! A backend implements [`Backend`]: a fresh migrated database per case, as a driver. Each
//! case declares the capabilities it needs ([`CASES`]); the backend's instantiation lists
//! every case either to run or to skip, naming the capability it lacks. Skipped cases are
//! `#[ignore]`d with that reason, so `cargo test` reports them; a generated test checks
//! that the lists cover every case, and that a case is skipped only for a capability it
//! needs and the backend lacks, so nothing passes silently.
//!
//! Cases put jobs into a given state through the row factory ([`factory`]), never through
//! raw SQL, and observe them through the driver's reads.

pub mod app_transaction;
pub mod cases;
pub mod factory;
pub mod jobs;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jobs_core::driver::{
    Capabilities, Capability, Count, Driver, JobCountParams, JobFilter, JobGetParams, JobListParams, JobRow,
    JobState,
};
use jobs_core::{Registry, Worker, WorkerBuilder};

use crate::wait_for;
pub use app_transaction::AppTransaction;

/// How long a case waits for a condition before it fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A database the suite runs on.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// What the backend's driver declares.
    const CAPABILITIES: Capabilities;

    /// A fresh, migrated database of the case's own, reached through a driver whose pool
    /// has `connections` connections.
    async fn database(connections: usize) -> TestDb;
}

/// One case's database: its driver, and whatever keeps the database alive.
pub struct TestDb {
    /// The driver.
    pub driver: Arc<dyn Driver>,
    /// Dropped with the case (a test database is removed then).
    pub keep_alive: Box<dyn Any + Send + Sync>,
    /// Opens another driver on the same database (another node's pool).
    pub another: Box<dyn Fn(usize) -> Arc<dyn Driver> + Send + Sync>,
    /// Opens a connection of the application's own (the backend's connection type) and
    /// begins a transaction on it.
    pub begin: app_transaction::Begin,
}

impl TestDb {
    /// A transaction on a connection of the application's own (see [`AppTransaction`]).
    pub async fn app_transaction(&self) -> Box<dyn AppTransaction> {
        (self.begin)().await
    }

    /// A worker builder on this database with the suite's jobs, polling every 200 ms and
    /// heartbeating every 500 ms, running "work" with 10 slots.
    pub fn worker(&self) -> WorkerBuilder {
        Worker::builder(self.driver.clone())
            .queue("work", 10)
            .registry(jobs::registry())
            .poll_interval(Duration::from_millis(200))
            .heartbeat_interval(Duration::from_millis(500))
    }

    /// One job, which must exist.
    pub async fn job(&self, id: i64) -> JobRow {
        self.driver.job_get(JobGetParams { id }).await.expect("get").expect("the job exists")
    }

    /// Waits until job `id` is in `state`; returns it then.
    pub async fn wait_state(&self, id: i64, state: JobState) -> JobRow {
        wait_for(&format!("job {id} to become {state}"), DEADLINE, || async {
            let row = self.driver.job_get(JobGetParams { id }).await.ok()??;
            (row.state == state).then_some(row)
        })
        .await
    }

    /// How many jobs are in `state` (exactly, up to a million).
    pub async fn count(&self, state: Option<JobState>) -> i64 {
        let filter = JobFilter { states: state.into_iter().collect(), ..JobFilter::default() };
        match self.driver.job_count(JobCountParams { filter: &filter, cap: 1_000_000 }).await.expect("count")
        {
            Count::Exact(n) => n,
            other => panic!("expected an exact count, got {other:?}"),
        }
    }

    /// Every job, oldest first.
    pub async fn all_jobs(&self) -> Vec<JobRow> {
        let filter = JobFilter::default();
        let mut all = Vec::new();
        let mut before = None;
        loop {
            let page = self.driver.job_list(JobListParams { filter: &filter, before, limit: 10_000 }).await;
            let page = page.expect("list");
            let Some(last) = page.last() else { break };
            before = Some(last.id);
            all.extend(page);
        }
        all.reverse();
        all
    }
}

/// A case of the suite and the capabilities it needs.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Its name, the name of its function in [`cases`].
    pub name: &'static str,
    /// What the backend must have for it to run.
    pub requires: &'static [Capability],
}

/// Every case, with what it needs.
pub const CASES: &[Case] = &[
    Case { name: "claims_follow_priority_then_due_time_then_age", requires: &[] },
    Case { name: "three_workers_of_fifty_slots_run_each_job_exactly_once", requires: &[] },
    Case { name: "each_claim_asks_for_its_share_of_the_slots", requires: &[Capability::SkipLocked] },
    Case { name: "failures_retry_on_the_backoff_policy_then_discard", requires: &[] },
    Case { name: "panics_timeouts_snoozes_cancels_and_discards_are_recorded", requires: &[] },
    Case { name: "delete_on_completion_leaves_no_row", requires: &[] },
    Case { name: "a_late_completion_after_a_rescue_is_ignored", requires: &[] },
    Case { name: "a_dead_nodes_jobs_are_rescued_and_run_elsewhere", requires: &[] },
    Case { name: "a_job_past_its_timeout_on_a_live_node_is_rescued_and_fenced", requires: &[] },
    Case { name: "a_claim_whose_reply_was_lost_is_handed_back_by_its_own_node", requires: &[] },
    Case { name: "a_rescued_job_runs_before_jobs_enqueued_after_it", requires: &[] },
    Case { name: "a_standby_leads_as_soon_as_the_leaders_node_is_silent", requires: &[] },
    Case { name: "dead_nodes_are_forgotten_after_the_cleanup_period", requires: &[] },
    Case { name: "jobs_whose_uniqueness_key_was_taken_meanwhile_are_discarded_not_stuck", requires: &[] },
    Case { name: "one_leader_at_a_time_and_another_takes_over_when_the_lease_expires", requires: &[] },
    Case { name: "a_paused_queue_is_not_claimed_until_resumed", requires: &[] },
    Case { name: "a_higher_priority_job_overtakes_the_buffer", requires: &[] },
    Case { name: "a_buffered_job_of_higher_priority_starts_first", requires: &[] },
    Case { name: "two_nodes_on_one_queue_both_get_work", requires: &[] },
    Case { name: "buffered_jobs_are_the_nodes_and_go_back_on_shutdown", requires: &[] },
    Case { name: "a_killed_nodes_buffered_jobs_are_rescued", requires: &[] },
    Case { name: "a_buffered_jobs_timeout_starts_when_it_runs", requires: &[] },
    Case { name: "a_buffered_job_that_waits_too_long_goes_to_a_free_node", requires: &[] },
    Case { name: "pausing_a_queue_hands_its_buffer_back", requires: &[] },
    Case { name: "shutdown_finishes_what_it_can_and_hands_back_the_rest", requires: &[] },
    Case {
        name: "a_notification_wakes_an_idle_worker_before_its_poll",
        requires: &[Capability::ListenNotify],
    },
    Case { name: "a_running_job_is_cancelled_without_notifications", requires: &[] },
    Case { name: "unique_keys_hold_in_their_states_and_free_up_after", requires: &[] },
    Case { name: "three_racing_nodes_fire_every_cron_slot_exactly_once", requires: &[] },
    Case { name: "daylight_saving_changes_neither_skip_nor_double_a_slot", requires: &[] },
    Case { name: "missed_slots_are_skipped_or_the_latest_runs_once", requires: &[] },
    Case { name: "schedules_are_retired_disabled_and_run_on_demand", requires: &[] },
    Case { name: "the_pruner_deletes_exactly_what_the_retention_says", requires: &[] },
    Case { name: "one_pruner_pass_keeps_pace_with_a_busy_queue", requires: &[] },
    Case { name: "actions_apply_to_one_job_many_jobs_and_every_job_matching_a_filter", requires: &[] },
    Case { name: "the_read_model_filters_pages_and_counts", requires: &[] },
    Case {
        name: "search_finds_jobs_by_a_subset_of_their_arguments_or_metadata",
        requires: &[Capability::JsonContainment],
    },
    Case { name: "counts_past_the_cap_are_estimated", requires: &[Capability::CountEstimates] },
    Case { name: "a_global_limit_caps_what_runs_across_nodes", requires: &[] },
    Case { name: "a_rate_limit_slides_over_its_window", requires: &[] },
    Case { name: "workers_obey_the_queues_limits", requires: &[] },
    Case { name: "finished_jobs_behave_the_same_wherever_they_are_kept", requires: &[] },
    Case { name: "a_key_held_in_a_final_state_holds_after_the_archiver_ran", requires: &[] },
    Case { name: "jobs_lost_with_their_node_on_their_last_attempt_run_again", requires: &[] },
    Case { name: "the_rescue_follows_one_rule_for_cancels_timeouts_and_losses", requires: &[] },
    Case {
        name: "a_dead_nodes_lock_frees_its_lease_and_its_jobs_in_seconds",
        requires: &[Capability::LivenessLocks],
    },
    Case { name: "a_node_name_in_use_is_refused", requires: &[] },
    Case { name: "a_node_publishes_its_kinds_options", requires: &[] },
    Case { name: "a_node_keeps_two_runs_of_one_job_apart", requires: &[] },
    Case { name: "a_leader_whose_renewal_hangs_stops_leading_by_its_lease", requires: &[] },
    Case { name: "a_claim_on_a_paused_queue_takes_nothing", requires: &[] },
    Case { name: "a_cancel_requested_while_running_wins_over_every_outcome_but_success", requires: &[] },
    Case {
        name: "a_duplicate_enqueue_never_waits_on_its_running_holder",
        requires: &[Capability::SkipLocked],
    },
    Case { name: "outcomes_and_retries_whose_key_is_now_held_never_fail_their_batch", requires: &[] },
    Case { name: "rescues_and_due_moves_that_end_a_job_whose_key_is_held_never_fail", requires: &[] },
    Case { name: "jobs_reach_the_applications_values", requires: &[] },
];

/// Runs case `name` on a fresh database of `B`, after checking the driver declares what
/// the backend says it does.
pub async fn run<B, F, Fut>(name: &str, case: F)
where
    B: Backend,
    F: FnOnce(TestDb) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = B::database(12).await;
    assert_eq!(db.driver.capabilities(), B::CAPABILITIES, "{name}: the driver's declared capabilities");
    case(db).await;
}

/// Checks that `run` and `skipped` cover [`CASES`] exactly once each, that every run case
/// has what it needs on `B`, and that every skipped case needs the capability it names
/// and `B` lacks it.
pub fn check_coverage<B: Backend>(run: &[&str], skipped: &[(&str, Capability)]) {
    for case in CASES {
        let ran = run.contains(&case.name);
        let skip = skipped.iter().find(|(name, _)| *name == case.name);
        let missing = B::CAPABILITIES.missing(case.requires);
        match (ran, skip) {
            (true, None) => {
                assert!(missing.is_empty(), "`{}` runs, but the backend lacks {missing:?}", case.name)
            }
            (false, Some((_, capability))) => {
                assert!(
                    missing.contains(capability),
                    "`{}` is skipped for lacking {capability}, but it does not need it or the backend has it",
                    case.name
                );
            }
            (true, Some(_)) => panic!("`{}` is both run and skipped", case.name),
            (false, None) => panic!("`{}` is neither run nor skipped: list it", case.name),
        }
    }
    for name in run.iter().chain(skipped.iter().map(|(n, _)| n)) {
        assert!(CASES.iter().any(|c| c.name == *name), "`{name}` is not a case of the suite");
    }
}

/// The suite's registry of jobs.
pub fn registry() -> Registry {
    jobs::registry()
}

/// Instantiates the suite for a backend: every case of [`CASES`] is listed once, to run or
/// to skip with the capability the backend lacks.
///
/// ```ignore
/// jobs_tests::conformance_suite! {
///     backend: Postgres;
///     run: [claims_follow_priority_then_due_time_then_age, ...];
///     skip: [];
/// }
/// ```
#[macro_export]
macro_rules! conformance_suite {
    (backend: $backend:ty; run: [$($case:ident),* $(,)?]; skip: [$($skipped:ident => $capability:ident),* $(,)?];) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::conformance::run::<$backend, _, _>(
                    stringify!($case),
                    $crate::conformance::cases::$case,
                ).await;
            }
        )*
        $(
            $crate::skipped_case!($capability, $skipped);
        )*
        #[test]
        fn the_suite_covers_every_case_and_skips_only_what_the_backend_lacks() {
            $crate::conformance::check_coverage::<$backend>(
                &[$(stringify!($case)),*],
                &[$((stringify!($skipped), jobs_core::driver::Capability::$capability)),*],
            );
        }
    };
}

/// A skipped case: an ignored test whose reason names the capability the backend lacks
/// (`cargo test` prints it; the reason must be a literal, hence one arm per capability).
#[doc(hidden)]
#[macro_export]
macro_rules! skipped_case {
    (ListenNotify, $case:ident) => {
        #[test]
        #[ignore = "skipped: the backend lacks LISTEN/NOTIFY (Capability::ListenNotify)"]
        fn $case() {}
    };
    (SkipLocked, $case:ident) => {
        #[test]
        #[ignore = "skipped: the backend lacks SKIP LOCKED (Capability::SkipLocked)"]
        fn $case() {}
    };
    (CountEstimates, $case:ident) => {
        #[test]
        #[ignore = "skipped: the backend lacks planner count estimates (Capability::CountEstimates)"]
        fn $case() {}
    };
    (JsonContainment, $case:ident) => {
        #[test]
        #[ignore = "skipped: the backend lacks JSON containment search (Capability::JsonContainment)"]
        fn $case() {}
    };
    (LivenessLocks, $case:ident) => {
        #[test]
        #[ignore = "skipped: the backend lacks liveness locks held by each node's process (Capability::LivenessLocks)"]
        fn $case() {}
    };
    (Returning, $case:ident) => {
        #[test]
        #[ignore = "skipped: the backend lacks RETURNING (Capability::Returning)"]
        fn $case() {}
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoNotifications;

    #[async_trait]
    impl Backend for NoNotifications {
        const CAPABILITIES: Capabilities = Capabilities::ALL.without(Capability::ListenNotify);

        async fn database(_connections: usize) -> TestDb {
            panic!("the coverage check opens no database")
        }
    }

    fn names_but(skipped: &[&str]) -> Vec<&'static str> {
        CASES.iter().map(|c| c.name).filter(|n| !skipped.contains(n)).collect()
    }

    #[test]
    fn the_coverage_check_refuses_a_missing_case_and_a_wrong_skip() {
        let notified = "a_notification_wakes_an_idle_worker_before_its_poll";
        let ok = names_but(&[notified]);
        check_coverage::<NoNotifications>(&ok, &[(notified, Capability::ListenNotify)]);
        let missing = std::panic::catch_unwind(|| check_coverage::<NoNotifications>(&ok, &[]));
        assert!(missing.is_err(), "a case neither run nor skipped");
        let ran = names_but(&[]);
        let runs_without = std::panic::catch_unwind(|| check_coverage::<NoNotifications>(&ran, &[]));
        assert!(runs_without.is_err(), "a case run without what it needs");
        let claims = "claims_follow_priority_then_due_time_then_age";
        let wrong = names_but(&[notified, claims]);
        let wrong_skip = std::panic::catch_unwind(|| {
            check_coverage::<NoNotifications>(
                &wrong,
                &[(notified, Capability::ListenNotify), (claims, Capability::ListenNotify)],
            )
        });
        assert!(wrong_skip.is_err(), "a case skipped for a capability it does not need");
    }
}
