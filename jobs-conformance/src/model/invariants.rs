//! What may be true after a step: the model's invariants, checked against the whole table
//! read back (a job in one state, no (job, attempt) run twice, a final state only after a
//! started run or an explicit action, a key held by at most one job, limits obeyed).

use std::collections::HashMap;

use jobs_core::driver::workflow::DEPENDENCY_FAILED;
use jobs_core::driver::{JobRow, JobState, NODE_LOST, TIMED_OUT};

use super::allowed::Allowed;
use super::ops::{Op, QUEUES};
use super::system::{MAX_NODE_LOSSES, System};

fn is_unique_in(row: &JobRow, state: JobState) -> bool {
    row.unique_key.is_some() && row.unique_states.as_ref().is_some_and(|s| s.contains(&state))
}

fn entries(row: &JobRow) -> Vec<serde_json::Value> {
    row.errors.as_array().cloned().unwrap_or_default()
}

/// `row` is one of `queue`'s running jobs and holds a place under its limits: its run is
/// not among the `ended` ones (their handler returned; the outcome waits).
fn holds_place(row: &JobRow, queue: usize, ended: &[(i64, i32)]) -> bool {
    row.queue == QUEUES[queue] && row.state == JobState::Running && !ended.contains(&(row.id, row.attempt))
}

/// A row's partition key (`None`: unkeyed).
fn partition_key(row: &JobRow) -> Option<String> {
    row.meta.get(jobs_core::driver::partition::PARTITION_META_KEY)?.as_str().map(str::to_owned)
}

fn error_type(entry: &serde_json::Value) -> &str {
    entry["error_type"].as_str().unwrap_or_default()
}

impl System {
    /// A claim took only available jobs of its queue, in order, at most `limit` (and what
    /// the queue's global limit leaves; per key with a per-key limit), none of a paused
    /// queue, and never an attempt number that ran. The claiming node's `ended` runs (their
    /// handler returned) hold no place: a running row at such a (job, attempt) is not
    /// counted.
    pub(super) fn check_claim(
        &self,
        queue: usize,
        limit: usize,
        ended: &[(i64, i32)],
        claimed: &[jobs_core::driver::ClaimedJob],
    ) {
        assert!(claimed.len() <= limit, "claimed {} for a limit of {limit}", claimed.len());
        if self.paused[queue] {
            assert!(claimed.is_empty(), "a paused queue was claimed: {claimed:?}");
        }
        let mut eligible: Vec<&JobRow> = self
            .rows
            .values()
            .filter(|r| r.queue == QUEUES[queue] && r.state == JobState::Available)
            .collect();
        eligible.sort_by_key(|r| (r.priority, r.scheduled_at, r.id));
        let room = match self.limits[queue] {
            Some(global) => {
                let running = self.rows.values().filter(|r| holds_place(r, queue, ended)).count();
                usize::from(global).saturating_sub(running)
            }
            None => usize::MAX,
        };
        if self.per_key[queue].is_some() || self.key_rate[queue].is_some() {
            self.check_keyed_claim(queue, limit.min(room), ended, &eligible, claimed);
        } else {
            let expected = if self.paused[queue] { 0 } else { limit.min(room).min(eligible.len()) };
            assert_eq!(
                claimed.len(),
                expected,
                "claim of {limit} on {}: room {room}, eligible {}",
                QUEUES[queue],
                eligible.len()
            );
            // The first jobs in line (by priority, due time, id), returned in any order.
            let mut took: Vec<i64> = claimed.iter().map(|j| j.id).collect();
            took.sort_unstable();
            let mut first: Vec<i64> = eligible.iter().take(claimed.len()).map(|r| r.id).collect();
            first.sort_unstable();
            assert_eq!(took, first, "claims go by priority, due time, id");
        }
        for job in claimed {
            let row = &self.rows[&job.id];
            assert_eq!(job.attempt, row.attempt + 1, "job {}: a claim takes the next attempt", job.id);
            assert!(
                !self.started.contains(&(job.id, job.attempt)),
                "job {} was claimed at attempt {}, which already ran",
                job.id,
                job.attempt
            );
        }
    }

    /// A claim on a queue with a per-key limit or rate: of each key, at most what its limit
    /// and its rate leave, and the first in line; in all, no more than the limits and the
    /// jobs allow, and something whenever a keyed job could run. (Which keys get the claim
    /// is the turn's business; the unkeyed group may sit out up to 30 s after it was found
    /// empty.)
    ///
    /// The rate counts starts in slices of a twentieth of the period, plus the slice before
    /// them: a claim at `now` counts every start since `now - period` and none before
    /// `now - period - slice`. So a key may get no more than its rate less its starts in the
    /// last period, and surely has room when its starts in the last period and a slice leave
    /// some.
    fn check_keyed_claim(
        &self,
        queue: usize,
        room: usize,
        ended: &[(i64, i32)],
        eligible: &[&JobRow],
        claimed: &[jobs_core::driver::ClaimedJob],
    ) {
        let per_key = self.per_key[queue].map_or(usize::MAX, usize::from);
        let running = |key: &Option<String>| {
            self.rows.values().filter(|r| holds_place(r, queue, ended) && &partition_key(r) == key).count()
        };
        let period = chrono::TimeDelta::seconds(i64::from(super::ops::KEY_RATE_PERIOD_SECS));
        let started_since = |key: &Option<String>, since: chrono::DateTime<chrono::Utc>| {
            let starts = self.key_starts.get(&(queue, key.clone()));
            starts.map_or(0, |s| s.iter().filter(|t| **t > since).count())
        };
        // What the rate leaves a key: at most, and surely.
        let rate_left = |key: &Option<String>| match self.key_rate[queue] {
            Some(rate) => {
                let rate = usize::from(rate);
                let most = rate.saturating_sub(started_since(key, self.now - period));
                let surely = rate.saturating_sub(started_since(key, self.now - period - period / 20));
                (most, surely)
            }
            None => (usize::MAX, usize::MAX),
        };
        let mut keys: Vec<Option<String>> = eligible.iter().map(|r| partition_key(r)).collect();
        keys.sort();
        keys.dedup();
        let (mut most, mut keyed_room) = (0_usize, 0_usize);
        for key in &keys {
            let line: Vec<i64> = eligible.iter().filter(|r| &partition_key(r) == key).map(|r| r.id).collect();
            let (rate_most, rate_surely) = rate_left(key);
            let left = per_key.saturating_sub(running(key)).min(rate_most);
            let surely = per_key.saturating_sub(running(key)).min(rate_surely);
            let mut took: Vec<i64> = claimed
                .iter()
                .filter(|j| &jobs_core::driver::partition::partition_key_of(&j.meta) == key)
                .map(|j| j.id)
                .collect();
            assert!(took.len() <= left, "claimed {} of key {key:?} with room for {left}", took.len());
            took.sort_unstable();
            let mut first: Vec<i64> = line.iter().take(took.len()).copied().collect();
            first.sort_unstable();
            assert_eq!(took, first, "a key's jobs go by priority, due time, id ({key:?})");
            most = most.saturating_add(left.min(line.len()));
            if key.is_some() {
                keyed_room += surely.min(line.len());
            }
        }
        let taken: usize = claimed.iter().filter(|j| eligible.iter().any(|r| r.id == j.id)).count();
        assert_eq!(taken, claimed.len(), "a claim took a job that was not available: {claimed:?}");
        if self.paused[queue] {
            return;
        }
        assert!(
            claimed.len() <= room.min(most),
            "claimed {} with room for {}",
            claimed.len(),
            room.min(most)
        );
        if room > 0 && keyed_room > 0 {
            assert!(!claimed.is_empty(), "nothing claimed while keyed jobs could run (room {room})");
        }
    }

    /// Reads every row and checks the invariants against the rows before `op`.
    pub(super) fn check(&mut self, op: &Op, allowed: Allowed) {
        let rows = self.block(self.db().all_jobs());
        let mut now: HashMap<i64, JobRow> = HashMap::with_capacity(rows.len());
        for row in rows {
            let id = row.id;
            assert!(now.insert(id, row).is_none(), "job {id} is listed twice (after {op:?})");
        }
        // A key is held by at most one job in its unique states.
        let mut holders: HashMap<&[u8], i64> = HashMap::new();
        for row in now.values() {
            if is_unique_in(row, row.state)
                && let Some(other) = holders.insert(row.unique_key.as_deref().unwrap_or_default(), row.id)
            {
                panic!("jobs {other} and {} hold one key (after {op:?})", row.id);
            }
        }
        // Running jobs of a limited queue stay within its limit (a lowered limit excepted:
        // its running jobs finish). A run whose handler returned on the claiming node holds
        // no place for its claim: its row reads running until its outcome is written.
        let ended: Vec<(i64, i32)> = match op {
            Op::Claim { node, .. } => self.nodes[*node].ended(),
            _ => Vec::new(),
        };
        for (queue, limit) in self.limits.iter().enumerate() {
            if let (Some(limit), Op::Claim { queue: claimed, .. }) = (limit, op)
                && *claimed == queue
            {
                let running = now.values().filter(|r| holds_place(r, queue, &ended)).count();
                let before = self.rows.values().filter(|r| holds_place(r, queue, &ended)).count();
                assert!(
                    running <= usize::from(*limit) || running <= before,
                    "{running} running on {} over its limit of {limit}",
                    QUEUES[queue]
                );
            }
        }
        // No key of a queue with a per-key limit runs more than it (a lowered limit
        // excepted).
        for (queue, per_key) in self.per_key.iter().enumerate() {
            if let (Some(per_key), Op::Claim { queue: claimed, .. }) = (per_key, op)
                && *claimed == queue
            {
                let count = |rows: &mut dyn Iterator<Item = &JobRow>| {
                    let mut by_key: HashMap<Option<String>, usize> = HashMap::new();
                    for r in rows.filter(|r| holds_place(r, queue, &ended)) {
                        *by_key.entry(partition_key(r)).or_default() += 1;
                    }
                    by_key
                };
                let before = count(&mut self.rows.values());
                for (key, running) in count(&mut now.values()) {
                    assert!(
                        running <= usize::from(*per_key) || running <= before.get(&key).copied().unwrap_or(0),
                        "{running} of key {key:?} running on {} over its per-key limit of {per_key}",
                        QUEUES[queue]
                    );
                }
            }
        }
        // Nothing appears but new jobs; nothing disappears but what was deleted or pruned.
        for id in now.keys() {
            assert!(
                self.rows.contains_key(id) || allowed.new.contains(id),
                "job {id} appeared (after {op:?})"
            );
        }
        for (id, before) in &self.rows {
            if !now.contains_key(id) {
                assert!(
                    allowed.vanish.contains(id)
                        && (before.state.is_final() || matches!(op, Op::Delete { .. })),
                    "job {id} ({}) was lost (after {op:?})",
                    before.state
                );
                assert!(before.state != JobState::Running, "a running job {id} was deleted");
            }
        }
        // A job finishes only through a run that started, an explicit action, or a rule
        // that names itself in the job's errors.
        for (id, row) in &now {
            let was_final = self.rows.get(id).is_none_or(|b| b.state.is_final());
            if !row.state.is_final() || was_final || allowed.finish.contains(id) {
                continue;
            }
            let before = &self.rows[id];
            let last = entries(row).last().cloned().unwrap_or_default();
            // Rescues that could not tell whether the job ran: its node lost, or past its
            // timeout on its last attempt; as many as the rescuer allows discard it.
            let uncertain = |e: &serde_json::Value| {
                error_type(e) == NODE_LOST || (error_type(e) == TIMED_OUT && e["uncertain"] == true)
            };
            let losses = entries(row).iter().filter(|e| uncertain(e)).count() as i32;
            let cause = match row.state {
                JobState::Cancelled if before.cancel_requested_at.is_some() => Some("a cancel was requested"),
                // Waiting, or a run that ended to go again (handed back, rescued) while a
                // dependency failed it.
                JobState::Cancelled
                    if error_type(&last) == DEPENDENCY_FAILED
                        && matches!(before.state, JobState::Pending | JobState::Running) =>
                {
                    Some("a dependency failed it")
                }
                JobState::Discarded if error_type(&last) == "unique_conflict" => Some("its key is held"),
                JobState::Discarded
                    if last["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("another job holds its uniqueness key")) =>
                {
                    Some("its key is held")
                }
                JobState::Discarded if uncertain(&last) && losses >= MAX_NODE_LOSSES => {
                    Some("lost with its node or past its timeout too often")
                }
                _ => None,
            };
            assert!(
                cause.is_some(),
                "job {id} became {} without a started run or an action (after {op:?}): {:?}",
                row.state,
                row.errors
            );
            if let Some("its key is held") = cause {
                // Its key as it was: a job discarded for it may have given it up.
                let key = before.unique_key.as_deref();
                let held = now
                    .values()
                    .chain(self.rows.values())
                    .any(|o| o.id != row.id && o.unique_key.as_deref() == key && is_unique_in(o, o.state));
                assert!(held, "job {id} was discarded for a key nobody holds");
            }
        }
        self.check_workflows(op, &now);
        self.rows = now;
    }
}
