//! The system under test: a real driver on a real database, and simulated nodes that
//! claim, start, finish and lose runs as workers do, with an injected clock. After every
//! step the whole table is read back and checked against what may be true.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jobs_core::driver::{
    Completion, Driver, JobArchiveParams, JobCancelManyParams, JobClaimParams, JobCompleteManyParams,
    JobDeleteManyParams, JobInsertManyParams, JobPruneParams, JobReleaseOrphansParams, JobRescueStuckParams,
    JobRetryManyParams, JobRow, JobScheduleDueParams, JobState, NODE_LOST, NewJob, NodeHeartbeatParams,
    QueueSetLimitsParams, QueueSetPausedParams, TIMED_OUT,
};

use super::ops::{Ending, KEYS, NODES, Op, QUEUES, Unique};
use crate::conformance::app_transaction::Begin;

/// How many times a job may be lost with its node before a rescue discards it, here.
pub const MAX_NODE_LOSSES: i32 = 3;
/// A node silent this long is gone.
const STALE: Duration = Duration::from_secs(8);
/// Claims younger than this are never released as orphans.
const ORPHAN_GRACE: Duration = Duration::from_secs(5);

/// A database to run the model on.
pub struct Target {
    /// The driver.
    pub driver: Arc<dyn Driver>,
    /// An application's transactions.
    pub begin: Begin,
    /// Statements that empty every table the model writes, between cases.
    pub wipe: Vec<&'static str>,
    /// Whatever keeps the database alive.
    pub keep_alive: Box<dyn std::any::Any + Send + Sync>,
}

/// A run a simulated node holds.
#[derive(Debug, Clone)]
struct Run {
    job: i64,
    attempt: i32,
    max_attempts: i32,
    queue: String,
    started: bool,
}

#[derive(Debug, Clone, Default)]
struct Node {
    alive: bool,
    runs: Vec<Run>,
}

/// What a step may do to the rows, beyond the rules every step obeys.
#[derive(Debug, Default)]
struct Allowed {
    /// Ids that may appear (new jobs).
    new: HashSet<i64>,
    /// Ids that may disappear (deleted, or pruned when finished).
    vanish: HashSet<i64>,
    /// Ids that may reach a final state by an explicit action or a started run's end.
    finish: HashSet<i64>,
}

/// The system under test.
pub struct System {
    target: Arc<Target>,
    runtime: Arc<tokio::runtime::Runtime>,
    now: DateTime<Utc>,
    nodes: Vec<Node>,
    /// Every (job, attempt) whose handler was called.
    started: HashSet<(i64, i32)>,
    /// The rows as the last check read them.
    rows: HashMap<i64, JobRow>,
    limits: [Option<u8>; 2],
    paused: [bool; 2],
}

fn node_name(i: usize) -> String {
    format!("n{i}")
}

fn is_unique_in(row: &JobRow, state: JobState) -> bool {
    row.unique_key.is_some() && row.unique_states.as_ref().is_some_and(|s| s.contains(&state))
}

fn entries(row: &JobRow) -> Vec<serde_json::Value> {
    row.errors.as_array().cloned().unwrap_or_default()
}

fn error_type(entry: &serde_json::Value) -> &str {
    entry["error_type"].as_str().unwrap_or_default()
}

impl System {
    /// A fresh system on `target`: every table emptied, every node alive (registered), the
    /// clock at now.
    pub fn new(target: Arc<Target>, runtime: Arc<tokio::runtime::Runtime>) -> System {
        let any = crate::any_db::AnyDb::of(&*target.driver);
        for sql in &target.wipe {
            runtime.block_on(any.execute(sql)).unwrap_or_else(|e| panic!("wipe `{sql}`: {e}"));
        }
        let system = System {
            target,
            runtime,
            now: Utc::now(),
            nodes: vec![Node { alive: true, runs: Vec::new() }; NODES],
            started: HashSet::new(),
            rows: HashMap::new(),
            limits: [None; 2],
            paused: [false; 2],
        };
        for node in 0..NODES {
            system.heartbeat(node, true);
        }
        system
    }

    fn driver(&self) -> &dyn Driver {
        &*self.target.driver
    }

    fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// The known job `pick` maps onto (the rows as last read).
    fn pick_job(&self, pick: usize) -> Option<i64> {
        let mut ids: Vec<i64> = self.rows.keys().copied().collect();
        ids.sort_unstable();
        (!ids.is_empty()).then(|| ids[pick % ids.len()])
    }

    /// Applies `op`, then checks every invariant against the rows before it.
    pub fn step(&mut self, op: &Op) {
        let mut allowed = Allowed::default();
        match *op {
            Op::Enqueue { queue, priority, delay_s, max_attempts, timeout, unique, batch, rolled_back } => {
                let states = |u: Unique| match u {
                    Unique::Waiting => vec![JobState::Available, JobState::Scheduled, JobState::Retryable],
                    Unique::Pending => JobState::PENDING.to_vec(),
                    Unique::Ever => {
                        let mut s = JobState::PENDING.to_vec();
                        s.push(JobState::Completed);
                        s
                    }
                    Unique::Ended => vec![
                        JobState::Available,
                        JobState::Scheduled,
                        JobState::Retryable,
                        JobState::Completed,
                        JobState::Discarded,
                        JobState::Cancelled,
                    ],
                };
                let jobs: Vec<NewJob> = (0..batch)
                    .map(|_| {
                        let mut job = NewJob::new("model.job", QUEUES[queue], "{}");
                        job.priority = priority;
                        job.max_attempts = i32::from(max_attempts);
                        job.timeout_ms = timeout.then_some(10_000);
                        job.delay_ms = delay_s.map(|s| i64::from(s) * 1000);
                        job.unique =
                            unique.map(|(k, u)| (format!("key-{}", k % KEYS).into_bytes(), states(u)));
                        job
                    })
                    .collect();
                if rolled_back {
                    let begin = &self.target.begin;
                    self.block(async {
                        let mut tx = begin().await;
                        tx.insert(&jobs).await.expect("enqueue in a transaction");
                        tx.rollback().await.expect("rollback");
                    });
                } else {
                    let params = JobInsertManyParams { jobs: &jobs, now: Some(self.now) };
                    let inserted = self.block(self.driver().job_insert_many(params)).expect("enqueue");
                    for entry in inserted.iter().filter(|e| !e.existing) {
                        allowed.new.insert(entry.id);
                    }
                    // A duplicate is a job that was there, or the batch's first copy.
                    for entry in inserted.iter().filter(|e| e.existing) {
                        assert!(
                            self.rows.contains_key(&entry.id) || allowed.new.contains(&entry.id),
                            "enqueue returned an existing job {} that does not exist",
                            entry.id
                        );
                    }
                }
            }
            Op::Claim { node, queue, limit, lose_reply } => {
                if !self.nodes[node].alive {
                    return self.check(op, allowed);
                }
                let name = node_name(node);
                let limited = self.limits[queue].is_some();
                let params = JobClaimParams {
                    queue: QUEUES[queue],
                    limit: usize::from(limit),
                    node: &name,
                    now: Some(self.now),
                    recurring_size: false,
                    limited,
                };
                let claimed = self.block(self.driver().job_claim(params)).expect("claim");
                self.check_claim(queue, usize::from(limit), &name, &claimed);
                if !lose_reply {
                    for job in claimed {
                        self.nodes[node].runs.push(Run {
                            job: job.id,
                            attempt: job.attempt,
                            max_attempts: job.max_attempts,
                            queue: job.queue,
                            started: false,
                        });
                    }
                }
            }
            Op::Start { node, pick } => {
                let runs = &mut self.nodes[node].runs;
                if let Some(run) = (!runs.is_empty()).then(|| pick % runs.len()).map(|i| &mut runs[i])
                    && !run.started
                {
                    run.started = true;
                    let first = self.started.insert((run.job, run.attempt));
                    assert!(first, "job {} ran twice at attempt {}", run.job, run.attempt);
                }
            }
            Op::Finish { node, pick, ending } => {
                let runs = &mut self.nodes[node].runs;
                if runs.is_empty() {
                    return self.check(op, allowed);
                }
                let run = runs.remove(pick % runs.len());
                let ending = match (run.started, ending) {
                    (false, _) => Ending::HandBack,
                    (true, Ending::HandBack) => Ending::Stop,
                    (true, e) => e,
                };
                let completion = completion(&run, ending);
                let name = node_name(node);
                let current = self.rows.get(&run.job).is_some_and(|row| {
                    row.state == JobState::Running
                        && row.attempt == run.attempt
                        && row.attempted_by.last() == Some(&name)
                });
                let params = JobCompleteManyParams { completions: &[completion], now: Some(self.now) };
                let applied = self.block(self.driver().job_complete_many(params)).expect("complete");
                assert_eq!(
                    applied == vec![run.job],
                    current,
                    "job {} attempt {} on {name}: an outcome applies exactly when its run is the current one",
                    run.job,
                    run.attempt
                );
                if run.started {
                    allowed.finish.insert(run.job);
                }
            }
            Op::Cancel { pick } => {
                if let Some(id) = self.pick_job(pick) {
                    self.block(self.driver().job_cancel_many(JobCancelManyParams { ids: &[id] }))
                        .expect("cancel");
                    allowed.finish.insert(id);
                }
            }
            Op::Retry { pick } => {
                if let Some(id) = self.pick_job(pick) {
                    self.block(self.driver().job_retry_many(JobRetryManyParams { ids: &[id] }))
                        .expect("retry");
                }
            }
            Op::Delete { pick } => {
                if let Some(id) = self.pick_job(pick) {
                    self.block(self.driver().job_delete_many(JobDeleteManyParams { ids: &[id] }))
                        .expect("delete");
                    allowed.vanish.insert(id);
                }
            }
            Op::Pause { queue, paused } => {
                let params = QueueSetPausedParams { queue: QUEUES[queue], paused };
                self.block(self.driver().queue_set_paused(params)).expect("pause");
                self.paused[queue] = paused;
            }
            Op::Limit { queue, limit } => {
                let params = QueueSetLimitsParams {
                    queue: QUEUES[queue],
                    global_limit: limit.map(i32::from),
                    rate: None,
                };
                self.block(self.driver().queue_set_limits(params)).expect("limits");
                self.limits[queue] = limit;
            }
            Op::Heartbeat { node } => {
                if self.nodes[node].alive {
                    self.heartbeat(node, false);
                }
            }
            Op::Kill { node } => self.nodes[node] = Node::default(),
            Op::Revive { node } => {
                if !self.nodes[node].alive {
                    self.nodes[node].alive = true;
                    self.heartbeat(node, true);
                }
            }
            Op::Advance { secs } => {
                self.now += chrono::TimeDelta::seconds(i64::from(secs));
                // A buffered run waits at most a second for a slot: a live node hands
                // back the runs it has not started.
                for node in 0..NODES {
                    let (unstarted, kept): (Vec<Run>, Vec<Run>) =
                        std::mem::take(&mut self.nodes[node].runs).into_iter().partition(|r| !r.started);
                    self.nodes[node].runs = kept;
                    if unstarted.is_empty() {
                        continue;
                    }
                    let back: Vec<Completion> =
                        unstarted.iter().map(|r| completion(r, Ending::HandBack)).collect();
                    let params = JobCompleteManyParams { completions: &back, now: Some(self.now) };
                    self.block(self.driver().job_complete_many(params)).expect("hand back");
                }
            }
            Op::Rescue => {
                let params = JobRescueStuckParams {
                    node_stale_after: STALE,
                    lock_lost_grace: Duration::from_millis(1_500),
                    timeout_grace: Duration::from_secs(5),
                    lost_nodes: true,
                    lost_nodes_by_lock: true,
                    max_node_losses: MAX_NODE_LOSSES,
                    limit: 1_000,
                    rescuer: "rescuer",
                    now: Some(self.now),
                };
                self.block(self.driver().job_rescue_stuck(params)).expect("rescue");
            }
            Op::ReleaseOrphans { node } => {
                if self.nodes[node].alive {
                    let name = node_name(node);
                    let held: Vec<(i64, i32)> =
                        self.nodes[node].runs.iter().map(|r| (r.job, r.attempt)).collect();
                    let params = JobReleaseOrphansParams {
                        node: &name,
                        held: &held,
                        grace: ORPHAN_GRACE,
                        now: Some(self.now),
                    };
                    let released = self.block(self.driver().job_release_orphans(params)).expect("release");
                    for id in released {
                        let attempt = self.rows.get(&id).map_or(0, |r| r.attempt);
                        assert!(
                            !held.contains(&(id, attempt)),
                            "job {id}: a run its node holds was released as an orphan"
                        );
                    }
                }
            }
            Op::ScheduleDue => {
                let params = JobScheduleDueParams { limit: 1_000, now: Some(self.now) };
                self.block(self.driver().job_schedule_due(params)).expect("schedule");
            }
            Op::Prune => {
                for state in JobState::FINAL {
                    let params = JobPruneParams {
                        state,
                        retention: Duration::ZERO,
                        limit: 1_000,
                        now: Some(self.now),
                    };
                    self.block(self.driver().job_prune(params)).expect("prune");
                }
                allowed.vanish.extend(self.rows.values().filter(|r| r.state.is_final()).map(|r| r.id));
            }
            Op::Archive => {
                self.block(self.driver().job_archive(JobArchiveParams { limit: 1_000 })).expect("archive");
            }
        }
        self.check(op, allowed)
    }

    fn heartbeat(&self, node: usize, registering: bool) {
        let name = node_name(node);
        let queues = serde_json::json!({});
        let params = NodeHeartbeatParams {
            node: &name,
            host: "model",
            pid: i32::try_from(node).unwrap_or(0),
            queues: &queues,
            kinds: &[],
            now: Some(self.now),
            lock: None,
            registering,
        };
        self.block(self.driver().node_heartbeat(params)).expect("heartbeat");
    }

    /// A claim took only available jobs of its queue, in order, at most `limit` (and what
    /// the queue's global limit leaves), none of a paused queue, and never an attempt
    /// number that ran.
    fn check_claim(&self, queue: usize, limit: usize, node: &str, claimed: &[jobs_core::driver::ClaimedJob]) {
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
                let running = self
                    .rows
                    .values()
                    .filter(|r| r.queue == QUEUES[queue] && r.state == JobState::Running)
                    .count();
                usize::from(global).saturating_sub(running)
            }
            None => usize::MAX,
        };
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
        let _ = node;
    }

    /// Reads every row and checks the invariants against the rows before `op`.
    fn check(&mut self, op: &Op, allowed: Allowed) {
        let rows = self.block(crate::faults::all_jobs(self.driver()));
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
        // its running jobs finish).
        for (queue, limit) in self.limits.iter().enumerate() {
            if let (Some(limit), Op::Claim { queue: claimed, .. }) = (limit, op)
                && *claimed == queue
            {
                let running =
                    now.values().filter(|r| r.queue == QUEUES[queue] && r.state == JobState::Running).count();
                let before = self
                    .rows
                    .values()
                    .filter(|r| r.queue == QUEUES[queue] && r.state == JobState::Running)
                    .count();
                assert!(
                    running <= usize::from(*limit) || running <= before,
                    "{running} running on {} over its limit of {limit}",
                    QUEUES[queue]
                );
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
        self.rows = now;
    }
}

/// The outcome a worker writes for `run` ending so.
fn completion(run: &Run, ending: Ending) -> Completion {
    let mut c = Completion {
        id: run.job,
        queue: run.queue.as_str().into(),
        attempt: run.attempt,
        state: JobState::Completed,
        result: None,
        error: None,
        delay_ms: None,
        give_back_attempt: false,
        extra_attempt: false,
        delete: false,
        timing: None,
    };
    let entry = |kind: &str| {
        Some(serde_json::json!({"attempt": run.attempt, "error_type": kind, "message": kind}).to_string())
    };
    match ending {
        Ending::Succeed => {}
        Ending::Fail if run.attempt >= run.max_attempts => {
            (c.state, c.error) = (JobState::Discarded, entry("failed"))
        }
        Ending::Fail => (c.state, c.error, c.delay_ms) = (JobState::Retryable, entry("failed"), Some(1_000)),
        Ending::Snooze => {
            (c.state, c.error, c.delay_ms, c.extra_attempt) =
                (JobState::Scheduled, entry("snoozed"), Some(2_000), true)
        }
        Ending::Cancel => (c.state, c.error) = (JobState::Cancelled, entry("cancelled")),
        Ending::Discard => (c.state, c.error) = (JobState::Discarded, entry("refused")),
        Ending::HandBack => (c.state, c.give_back_attempt) = (JobState::Available, true),
        Ending::Stop => {
            (c.state, c.error, c.delay_ms, c.extra_attempt) =
                (JobState::Retryable, entry("shutdown"), Some(0), true)
        }
    }
    c
}
