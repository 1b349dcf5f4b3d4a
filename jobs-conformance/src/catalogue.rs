//! The one list of the suite's cases ([`with_cases!`](crate::with_cases)), with the
//! capability each needs, and [`CASES`], read from it.

use jobs_core::driver::Capability;

/// A case of the suite and the capabilities it needs.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Its name, the name of its function in [`cases`](crate::cases).
    pub name: &'static str,
    /// What the backend must have for it to run.
    pub requires: &'static [Capability],
}

/// Calls `$crate::$callback! { $($args)* cases: [name: [capability], …] }` with every case
/// of the suite and the capability it needs, if any (at most one per case: `__case!`
/// takes one; a case that needed two would not compile until it learns to): the one list
/// of cases, which
/// [`CASES`] and [`suite!`] read.
#[doc(hidden)]
#[macro_export]
macro_rules! with_cases {
    ($callback:ident { $($args:tt)* }) => {
        $crate::$callback! {
            $($args)*
            cases: [
            claims_follow_priority_then_due_time_then_age: [],
            three_workers_of_fifty_slots_run_each_job_exactly_once: [],
            each_claim_asks_for_its_share_of_the_slots: [SkipLocked],
            failures_retry_on_the_backoff_policy_then_discard: [],
            panics_timeouts_snoozes_cancels_and_discards_are_recorded: [],
            delete_on_completion_leaves_no_row: [],
            a_late_completion_after_a_rescue_is_ignored: [],
            a_dead_nodes_jobs_are_rescued_and_run_elsewhere: [],
            a_job_past_its_timeout_on_a_live_node_is_rescued_and_fenced: [],
            a_claim_whose_reply_was_lost_is_handed_back_by_its_own_node: [],
            a_rescued_job_runs_before_jobs_enqueued_after_it: [],
            a_standby_leads_as_soon_as_the_leaders_node_is_silent: [],
            dead_nodes_are_forgotten_after_the_cleanup_period: [],
            jobs_whose_uniqueness_key_was_taken_meanwhile_are_discarded_not_stuck: [],
            one_leader_at_a_time_and_another_takes_over_when_the_lease_expires: [],
            a_paused_queue_is_not_claimed_until_resumed: [],
            a_higher_priority_job_overtakes_the_buffer: [],
            a_buffered_job_of_higher_priority_starts_first: [],
            two_nodes_on_one_queue_both_get_work: [],
            buffered_jobs_are_the_nodes_and_go_back_on_shutdown: [],
            a_killed_nodes_buffered_jobs_are_rescued: [],
            a_buffered_jobs_timeout_starts_when_it_runs: [],
            a_buffered_job_that_waits_too_long_goes_to_a_free_node: [],
            pausing_a_queue_hands_its_buffer_back: [],
            shutdown_finishes_what_it_can_and_hands_back_the_rest: [],
            a_notification_wakes_an_idle_worker_before_its_poll: [ListenNotify],
            a_running_job_is_cancelled_without_notifications: [],
            unique_keys_hold_in_their_states_and_free_up_after: [],
            three_racing_nodes_fire_every_cron_slot_exactly_once: [],
            daylight_saving_changes_neither_skip_nor_double_a_slot: [],
            missed_slots_are_skipped_or_the_latest_runs_once: [],
            schedules_are_retired_disabled_and_run_on_demand: [],
            the_pruner_deletes_exactly_what_the_retention_says: [],
            one_pruner_pass_keeps_pace_with_a_busy_queue: [],
            actions_apply_to_one_job_many_jobs_and_every_job_matching_a_filter: [],
            the_read_model_filters_pages_and_counts: [],
            search_finds_jobs_by_a_subset_of_their_arguments_or_metadata: [JsonContainment],
            counts_past_the_cap_are_estimated: [CountEstimates],
            a_global_limit_caps_what_runs_across_nodes: [],
            a_rate_limit_slides_over_its_window: [],
            workers_obey_the_queues_limits: [],
            limits_set_again_read_back_as_set: [],
            a_jobs_end_frees_its_room_before_its_outcome_is_written: [SkipLocked],
            per_key_claims_take_the_keys_in_turn: [],
            new_keys_wait_for_the_next_round: [],
            per_key_limits_hold_across_three_workers: [],
            a_kinds_declared_limit_applies_to_its_queue: [],
            a_rescued_job_frees_its_keys_place: [],
            ended_runs_leave_their_room: [],
            the_limits_usage_reads_running_keys_and_the_rates_starts: [],
            a_rate_per_key_slides_over_each_keys_window: [],
            rates_per_key_hold_across_three_workers: [],
            finished_jobs_behave_the_same_wherever_they_are_kept: [],
            a_key_held_in_a_final_state_holds_after_the_archiver_ran: [],
            jobs_lost_with_their_node_on_their_last_attempt_run_again: [],
            the_rescue_follows_one_rule_for_cancels_timeouts_and_losses: [],
            a_dead_nodes_lock_frees_its_lease_and_its_jobs_in_seconds: [LivenessLocks],
            a_node_name_in_use_is_refused: [],
            a_node_publishes_its_kinds_options: [],
            a_node_keeps_two_runs_of_one_job_apart: [],
            a_leader_whose_renewal_hangs_stops_leading_by_its_lease: [],
            a_claim_on_a_paused_queue_takes_nothing: [],
            a_cancel_requested_while_running_wins_over_every_outcome_but_success: [],
            a_duplicate_enqueue_never_waits_on_its_running_holder: [SkipLocked],
            outcomes_and_retries_whose_key_is_now_held_never_fail_their_batch: [],
            rescues_and_due_moves_that_end_a_job_whose_key_is_held_never_fail: [],
            jobs_reach_the_applications_values: [],
            a_job_enqueued_in_the_applications_transaction_commits_and_rolls_back_with_it: [],
            a_job_enqueued_on_a_synchronous_connection_commits_and_rolls_back_with_it: [],
            insert_middleware_changes_or_refuses_jobs_in_the_applications_transaction: [],
            run_middleware_nests_in_order_and_can_fail_the_attempt: [],
            a_cancel_or_pause_in_the_applications_transaction_holds_only_if_it_commits: [],
            a_retry_or_delete_in_the_applications_transaction_holds_only_if_it_commits: [],
            an_applications_transaction_holds_only_the_jobs_it_acts_on: [SkipLocked],
            a_diamond_workflow_runs_in_dependency_order: [],
            a_failed_dependency_cancels_or_holds_and_a_retry_resumes: [],
            workflow_steps_may_depend_on_existing_jobs: [],
            workers_run_a_workflow_in_order_and_hand_results_on: [],
            a_retry_brings_back_what_a_failure_cancelled_and_only_that: [],
            a_step_waiting_to_rerun_waits_for_its_retried_dependency: [],
            deleted_steps_leave_no_edges_and_wide_fan_outs_take_large_results: [],
            an_eager_settle_never_waits_for_an_application_transaction: [SkipLocked],
            a_completed_dependency_is_kept_on_a_delete_on_completion_queue: [],
            a_sweep_passes_over_a_page_an_application_holds: [SkipLocked],
            a_rescued_step_waits_for_its_retried_dependency: [],
            a_step_a_dependency_failed_while_it_ran_never_runs_past_it: [],
            a_whole_workflows_retry_never_makes_a_step_due_before_its_dependency: [SkipLocked],
            a_workflows_members_are_listed_and_counted_by_its_id: [],
            a_workflow_reads_by_id_and_goes_with_its_last_member: [],
            a_batch_calls_back_once_when_sealed_and_every_member_finished: [],
            ]
        }
    };
}

/// [`CASES`], from the list.
#[doc(hidden)]
#[macro_export]
macro_rules! case_table {
    (cases: [$($name:ident: [$($capability:ident)?]),* $(,)?]) => {
        &[$($crate::Case {
            name: stringify!($name),
            requires: &[$($crate::__capability!($capability))?],
        }),*]
    };
}

/// `jobs_core::driver::Capability::$name`.
#[doc(hidden)]
#[macro_export]
macro_rules! __capability {
    ($name:ident) => {
        $crate::__private::Capability::$name
    };
}

/// Every case, with what it needs (from [`with_cases!`](crate::with_cases), the one list).
pub const CASES: &[Case] = with_cases!(case_table {});
