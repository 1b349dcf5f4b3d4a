//! The one rule every driver applies to a `running` job taken back from its node: what it
//! becomes ([`RescueFate::decide`]) and the error entry that says why.
//!
//! A driver picks the jobs (locking them), reads the facts of [`Stuck`] with them, asks
//! [`RescueFate::decide`] for each, and writes the fates in one statement. The rule:
//!
//! - a job whose cancellation was requested ends `cancelled`;
//! - a job whose uniqueness key another job now holds (a duplicate enqueued while it ran)
//!   ends `discarded`: the duplicate does the work;
//! - a job that overran its timeout ([`RescueReason::Timeout`]) used its attempt, as any
//!   failure does, and goes back `available`; on its last attempt too, since the rescuer
//!   cannot tell a run that overran from a claim whose reply its node never received (a
//!   lost connection; the node's orphan check has a grace of its own): it goes back with
//!   one more attempt allowed, as a lost job does;
//! - a job lost with its node ([`RescueReason::NodeLost`]: the node died, froze or lost
//!   the database) or whose claim never reached its node ([`RescueReason::Orphaned`])
//!   did not fail: its attempt does not count. It goes back `available` in its place in
//!   line with one more attempt allowed (`max_attempts` + 1), so that a job on its last
//!   attempt — claimed ahead into a buffer, say, and never started — is not discarded.
//!   The attempt number itself is kept: the next claim takes a new one, and a late outcome
//!   of the lost run is fenced out by it. Only a job rescued this way (its node lost, or
//!   past its timeout on its last attempt)
//!   [`max_node_losses`](JobRescueStuckParams::max_node_losses) times (one that kills its
//!   process, or blocks its thread for ever, say) is `discarded`, so that it cannot take
//!   down node after node. Its earlier `rescued_node_lost` entries count, and its
//!   `rescued_timeout` entries marked `"uncertain": true` (a timeout on the last attempt;
//!   [`Stuck::uncertain_rescues`]).
//!
//! [`JobRescueStuckParams`]: super::JobRescueStuckParams

use chrono::{DateTime, Utc};

use crate::state::JobState;

/// Why a running job is taken back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RescueReason {
    /// Its node is gone: its liveness lock is free, or it stopped heartbeating.
    NodeLost,
    /// It ran past its timeout plus the grace, on a node that still heartbeats.
    Timeout,
    /// Its own node never received the claim (the reply was lost with the connection).
    Orphaned,
}

impl RescueReason {
    /// The reason a job picked for `self` is taken back for, given whether it is past its
    /// timeout and the grace and whether its node is gone: an orphan is one whatever the
    /// clock (its own node says it never received the claim, so it never started); a job
    /// past its timeout on a node that is not gone overran it; else its node is lost.
    pub const fn judged(self, timed_out: bool, node_gone: bool) -> RescueReason {
        match self {
            RescueReason::Orphaned => RescueReason::Orphaned,
            _ if timed_out && !node_gone => RescueReason::Timeout,
            _ => RescueReason::NodeLost,
        }
    }

    /// The error entry's type: `rescued_node_lost`, `rescued_timeout`, `rescued_orphaned`.
    pub const fn error_type(self) -> &'static str {
        match self {
            RescueReason::NodeLost => NODE_LOST,
            RescueReason::Timeout => TIMED_OUT,
            RescueReason::Orphaned => "rescued_orphaned",
        }
    }
}

/// The error type of a rescue whose node was lost; drivers count a job's earlier entries
/// of this type, and those of [`TIMED_OUT`] marked `"uncertain": true`
/// ([`Stuck::uncertain_rescues`]).
pub const NODE_LOST: &str = "rescued_node_lost";

/// The error type of a rescue of a job past its timeout.
pub const TIMED_OUT: &str = "rescued_timeout";

/// How many times a job may be lost with its node before a rescue discards it, unless the
/// rescuer is told otherwise.
pub const DEFAULT_MAX_NODE_LOSSES: i32 = 5;

/// What decides a rescued job's fate, read from its row as it was picked.
#[derive(Debug, Clone, PartialEq)]
pub struct Stuck {
    /// Job id.
    pub id: i64,
    /// Its queue (woken when the job goes back).
    pub queue: String,
    /// Why it is taken back.
    pub reason: RescueReason,
    /// Its attempt (the claim's).
    pub attempt: i32,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// A cancellation was requested.
    pub cancel_requested: bool,
    /// Another job holds its uniqueness key in a state the key is unique in, and the job
    /// would take it back by becoming available.
    pub key_held_by_another: bool,
    /// How many earlier rescues could not tell whether it ran: its `rescued_node_lost`
    /// error entries and its `rescued_timeout` ones marked `"uncertain": true`.
    pub uncertain_rescues: i32,
    /// Its uniqueness key, when the key is unique in `available`: of two jobs of one rescue
    /// with the same key, only the first (by id) may go back.
    pub available_key: Option<Vec<u8>>,
    /// The node of its latest claim.
    pub node: Option<String>,
}

/// What a rescue writes to one job.
#[derive(Debug, Clone, PartialEq)]
pub struct RescueFate {
    /// Job id.
    pub id: i64,
    /// `available`, `cancelled` or `discarded`.
    pub state: JobState,
    /// Attempts allowed from now on.
    pub max_attempts: i32,
    /// The error entry to append, as JSON.
    pub entry: serde_json::Value,
}

impl RescueFate {
    /// The fate of `job`, rescued by `rescuer` at `now`, where a job rescued without
    /// knowing whether it ran `max_node_losses` times is discarded (see the module's rule).
    pub fn decide(job: &Stuck, rescuer: &str, max_node_losses: i32, now: DateTime<Utc>) -> RescueFate {
        let last = job.attempt >= job.max_attempts;
        let lost = match job.reason {
            RescueReason::NodeLost | RescueReason::Orphaned => true,
            RescueReason::Timeout => last,
        };
        let losses = job.uncertain_rescues + i32::from(job.reason != RescueReason::Orphaned);
        let (state, max_attempts, outcome) = if job.cancel_requested {
            (JobState::Cancelled, job.max_attempts, "cancelled: a cancellation was requested".to_owned())
        } else if job.key_held_by_another {
            (
                JobState::Discarded,
                job.max_attempts,
                "discarded: another job holds its uniqueness key".to_owned(),
            )
        } else if lost && losses >= max_node_losses.max(1) {
            let outcome = format!(
                "discarded: lost with its node or past its timeout {losses} times (a job that kills its process or blocks its thread would take down every node); the count stays if you retry it"
            );
            (JobState::Discarded, job.max_attempts, outcome)
        } else if lost && job.reason == RescueReason::Timeout {
            let allowed = job.max_attempts.saturating_add(1);
            let outcome =
                "back in line with one more attempt: it was the last, and its run may never have started";
            (JobState::Available, allowed, outcome.to_owned())
        } else if lost {
            let allowed = job.max_attempts.saturating_add(1);
            (JobState::Available, allowed, "back in line; this attempt does not count".to_owned())
        } else {
            (JobState::Available, job.max_attempts, "back in line".to_owned())
        };
        let why = match job.reason {
            RescueReason::NodeLost => format!("its node stopped running ({} lost)", node_name(job)),
            RescueReason::Timeout => "still running past its timeout and the grace".to_owned(),
            RescueReason::Orphaned => {
                format!(
                    "claimed by {}, which never received the claim (its connection was lost)",
                    node_name(job)
                )
            }
        };
        let mut entry = serde_json::json!({
            "attempt": job.attempt,
            "at": now,
            "node": job.node,
            "error_type": job.reason.error_type(),
            "message": format!("{why}; rescued by {rescuer}; {outcome}"),
        });
        if lost && job.reason == RescueReason::Timeout {
            // Counted with the node losses (see `Stuck::uncertain_rescues`).
            entry["uncertain"] = serde_json::Value::Bool(true);
        }
        RescueFate { id: job.id, state, max_attempts, entry }
    }

    /// The fates of a whole rescue: [`decide`](Self::decide) for each job, where a job
    /// whose key an earlier job (by id) of the same rescue takes back counts as held by
    /// another (the rescue never breaks the unique index).
    pub fn decide_all(
        stuck: &[Stuck],
        rescuer: &str,
        max_node_losses: i32,
        now: DateTime<Utc>,
    ) -> Vec<RescueFate> {
        let mut order: Vec<&Stuck> = stuck.iter().collect();
        order.sort_by_key(|job| job.id);
        let mut taken: Vec<&[u8]> = Vec::new();
        order
            .into_iter()
            .map(|job| {
                let in_batch = job.available_key.as_deref().is_some_and(|key| taken.contains(&key));
                let fate = if in_batch {
                    let held = Stuck { key_held_by_another: true, ..job.clone() };
                    RescueFate::decide(&held, rescuer, max_node_losses, now)
                } else {
                    RescueFate::decide(job, rescuer, max_node_losses, now)
                };
                if let (JobState::Available, Some(key)) = (fate.state, job.available_key.as_deref()) {
                    taken.push(key);
                }
                fate
            })
            .collect()
    }

    /// Whether the job finished (its `finalized_at` is set).
    pub fn finishes(&self) -> bool {
        self.state.is_final()
    }
}

fn node_name(job: &Stuck) -> &str {
    job.node.as_deref().unwrap_or("an unknown node")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stuck(reason: RescueReason, attempt: i32, max_attempts: i32) -> Stuck {
        Stuck {
            id: 7,
            queue: "q".into(),
            reason,
            attempt,
            max_attempts,
            cancel_requested: false,
            key_held_by_another: false,
            uncertain_rescues: 0,
            available_key: None,
            node: Some("n1".into()),
        }
    }

    fn decide(job: &Stuck) -> RescueFate {
        RescueFate::decide(job, "leader", DEFAULT_MAX_NODE_LOSSES, Utc::now())
    }

    #[test]
    fn a_job_lost_with_its_node_on_its_last_attempt_goes_back_with_one_more() {
        let fate = decide(&stuck(RescueReason::NodeLost, 1, 1));
        assert_eq!((fate.state, fate.max_attempts), (JobState::Available, 2));
        assert_eq!(fate.entry["error_type"], NODE_LOST);
        assert_eq!(fate.entry["attempt"], 1);
        let orphan = decide(&stuck(RescueReason::Orphaned, 3, 3));
        assert_eq!((orphan.state, orphan.max_attempts), (JobState::Available, 4));
    }

    #[test]
    fn a_timeout_uses_its_attempt_but_never_discards_a_run_that_may_not_have_started() {
        let fate = decide(&stuck(RescueReason::Timeout, 2, 3));
        assert_eq!((fate.state, fate.max_attempts), (JobState::Available, 3));
        // The last attempt: one more, until the job was rescued unknowing too often.
        let mut last = stuck(RescueReason::Timeout, 3, 3);
        let fate = decide(&last);
        assert_eq!((fate.state, fate.max_attempts), (JobState::Available, 4));
        assert_eq!(fate.entry["error_type"], TIMED_OUT);
        assert_eq!(fate.entry["uncertain"], true);
        assert!(decide(&stuck(RescueReason::Timeout, 2, 3)).entry.get("uncertain").is_none());
        last.uncertain_rescues = DEFAULT_MAX_NODE_LOSSES - 1;
        assert_eq!(decide(&last).state, JobState::Discarded);
    }

    #[test]
    fn an_orphan_is_one_whatever_the_clock() {
        assert_eq!(RescueReason::Orphaned.judged(true, false), RescueReason::Orphaned);
        assert_eq!(RescueReason::NodeLost.judged(true, false), RescueReason::Timeout);
        assert_eq!(RescueReason::NodeLost.judged(true, true), RescueReason::NodeLost);
        assert_eq!(RescueReason::NodeLost.judged(false, true), RescueReason::NodeLost);
    }

    #[test]
    fn of_two_rescued_jobs_with_one_key_only_the_first_goes_back() {
        let keyed =
            |id| Stuck { id, available_key: Some(b"k".to_vec()), ..stuck(RescueReason::NodeLost, 1, 3) };
        let jobs = [keyed(9), keyed(4), stuck(RescueReason::NodeLost, 1, 3)];
        let fates = RescueFate::decide_all(&jobs, "r", 5, Utc::now());
        let states: Vec<(i64, JobState)> = fates.iter().map(|f| (f.id, f.state)).collect();
        assert_eq!(
            states,
            vec![(4, JobState::Available), (7, JobState::Available), (9, JobState::Discarded)]
        );
    }

    #[test]
    fn cancel_and_a_held_key_come_first_and_losses_end_in_discard() {
        let mut job = stuck(RescueReason::NodeLost, 1, 1);
        job.cancel_requested = true;
        job.key_held_by_another = true;
        assert_eq!(decide(&job).state, JobState::Cancelled);
        job.cancel_requested = false;
        assert_eq!(decide(&job).state, JobState::Discarded);
        let mut job = stuck(RescueReason::NodeLost, 9, 20);
        job.uncertain_rescues = DEFAULT_MAX_NODE_LOSSES - 2;
        assert_eq!(decide(&job).state, JobState::Available);
        job.uncertain_rescues = DEFAULT_MAX_NODE_LOSSES - 1;
        let fate = decide(&job);
        assert_eq!(fate.state, JobState::Discarded);
        assert!(fate.entry["message"].as_str().is_some_and(|m| m.contains("5 times")), "{}", fate.entry);
        // An orphan never ran: it does not count as a loss.
        job.reason = RescueReason::Orphaned;
        assert_eq!(decide(&job).state, JobState::Available);
    }
}
