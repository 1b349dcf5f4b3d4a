//! The operations the model-based test draws, and how: the reference state machine only
//! generates them (what may be true is checked on the system's side, against the real
//! driver, in `system`); picks of jobs, nodes and runs are indexes the system maps onto
//! what exists, so every generated sequence can be applied and shrunk.

use proptest::prelude::*;
use proptest_state_machine::ReferenceStateMachine;

/// Queues.
pub(super) const QUEUES: [&str; 2] = ["a", "b"];
/// Nodes (their names stay across the processes that take them: a restart with a fixed
/// name).
pub(super) const NODES: usize = 3;
/// Uniqueness keys.
pub(super) const KEYS: usize = 3;

/// How many partition keys the jobs are spread over (`p0`, `p1`, `p2`).
pub(super) const PARTITION_KEYS: u8 = 3;

/// The period of a queue's rate per key: a minute, counted in slices of 3 s.
pub(super) const KEY_RATE_PERIOD_SECS: u32 = 60;

/// Which states a job's key is unique in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unique {
    /// While it waits: available, scheduled, retryable (a duplicate may come while it runs).
    Waiting,
    /// While it waits or runs (the default: `JobState::DEFAULT_UNIQUE`).
    Unfinished,
    /// While it waits or runs, and once completed.
    Ever,
    /// While it waits, and once it ends (completed, discarded, cancelled), not while it
    /// runs: a duplicate may come then, and one of the two gives the key up as it ends.
    Ended,
}

/// What a run ends with, as a worker reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The handler returned a result.
    Succeed,
    /// The handler failed: retried after its backoff, discarded on its last attempt.
    Fail,
    /// The handler snoozed: run again later, its attempt not used up.
    Snooze,
    /// The handler cancelled the job.
    Cancel,
    /// The handler discarded the job (its arguments refused, say).
    Discard,
    /// A run that never started goes back (a buffered job at shutdown or pause).
    HandBack,
    /// A started run stopped at shutdown goes back, its attempt not used up.
    Stop,
}

/// One step.
#[derive(Debug, Clone)]
pub enum Op {
    /// Enqueue `batch` jobs (through the driver, or in an application's transaction that
    /// is rolled back).
    Enqueue {
        /// Queue index.
        queue: usize,
        /// Priority.
        priority: i16,
        /// Due this many seconds from now (none: now).
        delay_s: Option<u8>,
        /// Attempts allowed.
        max_attempts: u8,
        /// A timeout of 10 s.
        timeout: bool,
        /// A uniqueness key and its states.
        unique: Option<(usize, Unique)>,
        /// How many.
        batch: u8,
        /// In a transaction that is rolled back.
        rolled_back: bool,
        /// The partition key of the first (the next ones take the keys after it), or none.
        key: Option<u8>,
    },
    /// A node claims (its reply possibly lost on the way).
    Claim {
        /// Node index.
        node: usize,
        /// Queue index.
        queue: usize,
        /// At most this many.
        limit: u8,
        /// The reply never reaches the node.
        lose_reply: bool,
    },
    /// A node starts one of its claimed runs (calls the handler).
    Start {
        /// Node index.
        node: usize,
        /// Which of its runs.
        pick: usize,
    },
    /// A started run's handler returns: the outcome waits for the completer (a later
    /// `Finish` writes it), and the node's claims no longer count the run.
    End {
        /// Node index.
        node: usize,
        /// Which of its runs.
        pick: usize,
    },
    /// A node ends one of its runs and writes the outcome.
    Finish {
        /// Node index.
        node: usize,
        /// Which of its runs.
        pick: usize,
        /// How it ends.
        ending: Ending,
    },
    /// Someone cancels a job.
    Cancel {
        /// Which job.
        pick: usize,
    },
    /// Someone retries a job.
    Retry {
        /// Which job.
        pick: usize,
    },
    /// Someone deletes a job.
    Delete {
        /// Which job.
        pick: usize,
    },
    /// Someone pauses or resumes a queue.
    Pause {
        /// Queue index.
        queue: usize,
        /// Paused or resumed.
        paused: bool,
    },
    /// Someone sets (or removes) a queue's global and per-key limits, and its rate per key
    /// (so many a minute: `KEY_RATE_PERIOD_SECS`).
    Limit {
        /// Queue index.
        queue: usize,
        /// The global limit.
        limit: Option<u8>,
        /// The per-key limit.
        per_key: Option<u8>,
        /// The starts allowed per key per period.
        key_rate: Option<u8>,
    },
    /// A live node heartbeats.
    Heartbeat {
        /// Node index.
        node: usize,
    },
    /// A node's process dies: it forgets its runs and stops heartbeating.
    Kill {
        /// Node index.
        node: usize,
    },
    /// A new process takes a dead node's name.
    Revive {
        /// Node index.
        node: usize,
    },
    /// Time passes; live nodes hand back the runs they buffered and never started (their
    /// buffer's wait ran out).
    Advance {
        /// Seconds.
        secs: u8,
    },
    /// The leader's rescuer runs.
    Rescue,
    /// A node hands back the claims it does not hold (replies it lost).
    ReleaseOrphans {
        /// Node index.
        node: usize,
    },
    /// The scheduler makes due jobs available.
    ScheduleDue,
    /// The pruner deletes finished jobs.
    Prune,
    /// The archiver moves finished jobs.
    Archive,
    /// Someone enqueues a workflow: a chain of `steps` steps, the first waiting for the
    /// jobs `after` picks (none: it is due at once).
    Workflow {
        /// Queue index.
        queue: usize,
        /// Picks of existing jobs the first step waits for.
        after: Vec<usize>,
        /// How many steps, each waiting for the one before (some chains longer than a
        /// settle's cascade rounds).
        steps: u8,
        /// Its dependents are held, not cancelled, when a dependency fails.
        hold: bool,
    },
    /// The leader's settler settles the finishes nothing settled yet.
    Settle,
}

fn unique() -> impl Strategy<Value = Option<(usize, Unique)>> {
    prop_oneof![
        3 => Just(None),
        1 => (0..KEYS, prop_oneof![Just(Unique::Waiting), Just(Unique::Unfinished), Just(Unique::Ever), Just(Unique::Ended)]).prop_map(Some),
    ]
}

fn ending() -> impl Strategy<Value = Ending> {
    prop_oneof![
        4 => Just(Ending::Succeed),
        3 => Just(Ending::Fail),
        1 => Just(Ending::Snooze),
        1 => Just(Ending::Cancel),
        1 => Just(Ending::Discard),
        1 => Just(Ending::HandBack),
        1 => Just(Ending::Stop),
    ]
}

/// The generator of operations (its state: nothing the operations need; the system maps
/// every pick onto what exists).
#[derive(Debug, Clone, Copy)]
pub struct Generator;

impl ReferenceStateMachine for Generator {
    type State = ();
    type Transition = Op;

    fn init_state() -> BoxedStrategy<()> {
        Just(()).boxed()
    }

    fn transitions(_: &()) -> BoxedStrategy<Op> {
        let enqueue = (
            0..QUEUES.len(),
            0i16..3,
            prop_oneof![3 => Just(None), 1 => (1u8..30).prop_map(Some)],
            1u8..4,
            prop::bool::weighted(0.2),
            unique(),
            1u8..4,
            prop::bool::weighted(0.1),
            prop_oneof![1 => Just(None), 2 => (0u8..PARTITION_KEYS).prop_map(Some)],
        )
            .prop_map(
                |(queue, priority, delay_s, max_attempts, timeout, unique, batch, rolled_back, key)| {
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
                    }
                },
            );
        let node = 0..NODES;
        prop_oneof![
            8 => enqueue,
            8 => (node.clone(), 0..QUEUES.len(), 1u8..5, prop::bool::weighted(0.05))
                .prop_map(|(node, queue, limit, lose_reply)| Op::Claim { node, queue, limit, lose_reply }),
            8 => (node.clone(), any::<usize>()).prop_map(|(node, pick)| Op::Start { node, pick }),
            8 => (node.clone(), any::<usize>()).prop_map(|(node, pick)| Op::End { node, pick }),
            10 => (node.clone(), any::<usize>(), ending()).prop_map(|(node, pick, ending)| Op::Finish { node, pick, ending }),
            1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
            1 => any::<usize>().prop_map(|pick| Op::Retry { pick }),
            1 => any::<usize>().prop_map(|pick| Op::Delete { pick }),
            1 => (0..QUEUES.len(), any::<bool>()).prop_map(|(queue, paused)| Op::Pause { queue, paused }),
            2 => (0..QUEUES.len(), prop_oneof![Just(None), (1u8..4).prop_map(Some)], prop_oneof![1 => Just(None), 2 => (1u8..3).prop_map(Some)], prop_oneof![2 => Just(None), 1 => (1u8..4).prop_map(Some)])
                .prop_map(|(queue, limit, per_key, key_rate)| Op::Limit { queue, limit, per_key, key_rate }),
            4 => node.clone().prop_map(|node| Op::Heartbeat { node }),
            2 => node.clone().prop_map(|node| Op::Kill { node }),
            2 => node.clone().prop_map(|node| Op::Revive { node }),
            3 => (1u8..25).prop_map(|secs| Op::Advance { secs }),
            2 => Just(Op::Rescue),
            1 => node.prop_map(|node| Op::ReleaseOrphans { node }),
            2 => Just(Op::ScheduleDue),
            1 => Just(Op::Prune),
            1 => Just(Op::Archive),
            3 => (0..QUEUES.len(), prop::collection::vec(any::<usize>(), 0..3), prop_oneof![3 => 1u8..4, 1 => 9u8..13], any::<bool>())
                .prop_map(|(queue, after, steps, hold)| Op::Workflow { queue, after, steps, hold }),
            2 => Just(Op::Settle),
        ]
        .boxed()
    }

    fn apply(state: (), _: &Op) {
        state
    }
}
