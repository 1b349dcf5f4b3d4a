//! The system under test: a real driver on a real database, and simulated nodes that
//! claim, start, finish and lose runs as workers do, with an injected clock. After every
//! step the whole table is read back and checked against what may be true.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jobs_core::driver::partition::PARTITION_META_KEY;
use jobs_core::driver::{
    Capability, Completion, Driver, JobArchiveParams, JobCancelManyParams, JobCompleteManyParams,
    JobDeleteManyParams, JobInsertManyParams, JobPruneParams, JobReleaseOrphansParams, JobRescueStuckParams,
    JobRetryManyParams, JobRow, JobScheduleDueParams, JobState, NewJob, QueueSetLimitsParams,
    QueueSetPausedParams,
};

use super::allowed::Allowed;
use super::nodes::{Node, Run, completion};
use super::ops::{Ending, KEYS, NODES, Op, PARTITION_KEYS, QUEUES, Unique};
use crate::backend::TestDb;

/// How many times a job may be lost with its node before a rescue discards it, here.
pub const MAX_NODE_LOSSES: i32 = 3;
/// A node silent this long is gone.
pub(super) const STALE: Duration = Duration::from_secs(8);
/// Claims younger than this are never released as orphans.
pub(super) const ORPHAN_GRACE: Duration = Duration::from_secs(5);

/// The tables the model writes, which [`System::new`] empties between cases; with the
/// [`Archive`](Capability::Archive) capability, `jobs_archive` too.
const TABLES: [&str; 7] =
    ["jobs", "job_nodes", "job_queues", "job_leaders", "job_dependencies", "job_workflows", "job_key_rates"];

/// The system under test.
pub struct System {
    db: Arc<TestDb>,
    runtime: Arc<tokio::runtime::Runtime>,
    pub(super) now: DateTime<Utc>,
    pub(super) nodes: Vec<Node>,
    /// Every (job, attempt) whose handler was called.
    pub(super) started: HashSet<(i64, i32)>,
    /// The rows as the last check read them.
    pub(super) rows: HashMap<i64, JobRow>,
    pub(super) limits: [Option<u8>; 2],
    /// Each queue's per-key limit.
    pub(super) per_key: [Option<u8>; 2],
    /// Each queue's rate per key (so many per [`KEY_RATE_PERIOD_SECS`](super::ops::KEY_RATE_PERIOD_SECS)).
    pub(super) key_rate: [Option<u8>; 2],
    /// The times each (queue, key) was claimed while its queue had a rate per key (which
    /// counts only those).
    pub(super) key_starts: HashMap<(usize, Option<String>), Vec<DateTime<Utc>>>,
    pub(super) paused: [bool; 2],
    /// The workflows enqueued, and whether each holds its dependents on a failure.
    pub(super) workflows: HashMap<i64, bool>,
}

pub(super) fn node_name(i: usize) -> String {
    format!("n{i}")
}

impl System {
    /// A fresh system on `db`: every table emptied (in an application's transaction: the
    /// suite has no other way to write SQL), every node alive (registered), the clock at
    /// now.
    pub fn new(db: Arc<TestDb>, runtime: Arc<tokio::runtime::Runtime>) -> System {
        let archive = db.driver().capabilities().has(Capability::Archive);
        let tables = TABLES.iter().copied().chain(archive.then_some("jobs_archive"));
        runtime.block_on(async {
            let mut tx = db.app_transaction().await;
            for table in tables {
                let sql = format!("DELETE FROM {table}");
                tx.execute(&sql).await.unwrap_or_else(|e| panic!("`{sql}`: {e}"));
            }
            tx.commit().await.expect("commit the emptied tables");
        });
        let system = System {
            db,
            runtime,
            now: Utc::now(),
            nodes: vec![Node { alive: true, runs: Vec::new() }; NODES],
            started: HashSet::new(),
            rows: HashMap::new(),
            limits: [None; 2],
            per_key: [None; 2],
            key_rate: [None; 2],
            key_starts: HashMap::new(),
            paused: [false; 2],
            workflows: HashMap::new(),
        };
        for node in 0..NODES {
            system.heartbeat(node, true);
        }
        system
    }

    pub(super) fn db(&self) -> &TestDb {
        &self.db
    }

    pub(super) fn driver(&self) -> &dyn Driver {
        &**self.db.driver()
    }

    pub(super) fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// The known job `pick` maps onto (the rows as last read).
    pub(super) fn pick_job(&self, pick: usize) -> Option<i64> {
        let mut ids: Vec<i64> = self.rows.keys().copied().collect();
        ids.sort_unstable();
        (!ids.is_empty()).then(|| ids[pick % ids.len()])
    }

    /// Applies `op`, then checks every invariant against the rows before it.
    pub fn step(&mut self, op: &Op) {
        let mut allowed = Allowed::default();
        match *op {
            Op::Enqueue {
                queue,
                priority,
                delay_s,
                max_attempts,
                timeout,
                unique,
                batch,
                rolled_back,
                key,
            } => {
                let states = |u: Unique| match u {
                    Unique::Waiting => vec![JobState::Available, JobState::Scheduled, JobState::Retryable],
                    Unique::Unfinished => JobState::DEFAULT_UNIQUE.to_vec(),
                    Unique::Ever => {
                        let mut s = JobState::DEFAULT_UNIQUE.to_vec();
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
                    .map(|i| {
                        let mut job = NewJob::new("model.job", QUEUES[queue], "{}");
                        if let Some(key) = key {
                            let key = format!("p{}", (key + i) % PARTITION_KEYS);
                            job.meta = serde_json::json!({ PARTITION_META_KEY: key }).to_string().into();
                        }
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
                    self.block(async {
                        let mut tx = self.db.app_transaction().await;
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
            Op::Claim { node, queue, limit, lose_reply } => self.claim(node, queue, limit, lose_reply),
            Op::Start { node, pick } => self.start(node, pick),
            Op::End { node, pick } => self.end(node, pick),
            Op::Finish { node, pick, ending } => self.finish(node, pick, ending, &mut allowed),
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
                    self.check_deleted_edges(id);
                }
            }
            Op::Pause { queue, paused } => {
                let params = QueueSetPausedParams { queue: QUEUES[queue], paused };
                self.block(self.driver().queue_set_paused(params)).expect("pause");
                self.paused[queue] = paused;
            }
            Op::Limit { queue, limit, per_key, key_rate } => {
                let params = QueueSetLimitsParams {
                    queue: QUEUES[queue],
                    global_limit: limit.map(i32::from),
                    per_key_limit: per_key.map(i32::from),
                    rate: None,
                    per_key_rate: key_rate.map(|allowed| jobs_core::driver::RateLimit {
                        allowed: u32::from(allowed),
                        period_secs: super::ops::KEY_RATE_PERIOD_SECS,
                    }),
                };
                self.block(self.driver().queue_set_limits(params)).expect("limits");
                self.limits[queue] = limit;
                self.per_key[queue] = per_key;
                self.key_rate[queue] = key_rate;
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
            Op::Workflow { queue, ref after, steps, hold } => {
                let after: Vec<i64> = after.iter().filter_map(|pick| self.pick_job(*pick)).collect();
                allowed.new.extend(self.enqueue_workflow(queue, &after, steps, hold));
            }
            Op::Settle => self.settle(None),
        }
        self.check(op, allowed)
    }
}
