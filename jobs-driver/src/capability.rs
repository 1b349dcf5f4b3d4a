//! What a database can do, declared by its driver so that the engine and the dashboard
//! adapt instead of failing at run time.

use std::fmt;

/// One feature a backend may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// Notifications pushed from the database to every process (Postgres `LISTEN/NOTIFY`).
    /// Without it the engine polls: producers every `poll_interval`, and the heartbeat
    /// asks for cancellations of the jobs it runs.
    ListenNotify,
    /// Row locks that other claimers skip (`FOR UPDATE SKIP LOCKED`), so that several
    /// claims of one queue proceed at once. Without it claims serialise, and a worker keeps
    /// one claim in flight per queue.
    SkipLocked,
    /// Row-count estimates from the planner's statistics. Without them a count past its cap
    /// is reported as "more than" the cap.
    CountEstimates,
    /// Search of arguments and metadata by JSON containment (`{"user_id": 7}` matches
    /// every job whose arguments hold that field). Without it the dashboard hides search.
    JsonContainment,
    /// Statements that return the rows they changed (`UPDATE … RETURNING`), so a claim is
    /// one statement.
    Returning,
    /// An index serves searches of arguments and metadata among the jobs that wait or
    /// failed ([`INDEXED_SEARCH_STATES`]), so such a search is fast at any table size.
    /// Without it (and for other states, and error text, on every driver) the dashboard
    /// searches the newest jobs a window at a time.
    IndexedSearch,
    /// Finished jobs leave the table that claims and vacuum work on, for an archive table
    /// (Postgres: `jobs_archive`), so that keeping every finished job costs the queue
    /// nothing. Reads see both. With it, the leader runs the archiver (`job_archive`),
    /// which moves the jobs that finished outside a completion statement; without it the
    /// engine runs no archiver. (SQLite and MariaDB keep finished jobs in the jobs table.)
    Archive,
    /// A lock per node that its process holds for as long as it lives ([`node_hold`]:
    /// a session advisory lock, a named lock, a file lock), so that a killed node is known
    /// dead in seconds. Without it, a node is dead when its heartbeat is `node_stale_after`
    /// old, and a second process with a node's name is refused only while the first one's
    /// heartbeat is fresh.
    ///
    /// [`node_hold`]: crate::Driver::node_hold
    LivenessLocks,
    /// An index finds the jobs holding a tag (Postgres: a GIN index of the archive's tags),
    /// so that a tag filter (a tenant of thousands, say) counts and pages its jobs at any
    /// table size. Without it, the dashboard reads a tag's jobs as it searches: the newest
    /// jobs a window at a time, saying how far it read.
    IndexedTags,
    /// Reads on several connections at once run in parallel, on the database server's own
    /// threads, so a page that needs several independent reads asks them together. Without
    /// it (SQLite, whose reads run in the process and contend there: a dashboard overview
    /// took twice as long with its reads at once), reads go one after another.
    ParallelReads,
}

/// The states whose jobs' arguments and metadata an [`Capability::IndexedSearch`] index
/// covers: those that wait (scheduled, retryable) or failed (discarded, cancelled). Not
/// available, running or completed, which every job passes through: indexing them would
/// cost every job on the hot path.
pub const INDEXED_SEARCH_STATES: [crate::state::JobState; 4] = [
    crate::state::JobState::Scheduled,
    crate::state::JobState::Retryable,
    crate::state::JobState::Discarded,
    crate::state::JobState::Cancelled,
];

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 10] = [
        Capability::ListenNotify,
        Capability::SkipLocked,
        Capability::CountEstimates,
        Capability::JsonContainment,
        Capability::Returning,
        Capability::IndexedSearch,
        Capability::Archive,
        Capability::LivenessLocks,
        Capability::IndexedTags,
        Capability::ParallelReads,
    ];

    /// A short human name, used in skip reasons and error messages.
    pub const fn name(self) -> &'static str {
        match self {
            Capability::ListenNotify => "LISTEN/NOTIFY",
            Capability::SkipLocked => "SKIP LOCKED",
            Capability::CountEstimates => "planner count estimates",
            Capability::JsonContainment => "JSON containment search",
            Capability::Returning => "RETURNING",
            Capability::IndexedSearch => "an index for searches",
            Capability::Archive => "an archive table for finished jobs",
            Capability::LivenessLocks => "liveness locks held by each node's process",
            Capability::IndexedTags => "an index of tags",
            Capability::ParallelReads => "parallel reads",
        }
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of [`Capability`]s a driver has.
///
/// ```
/// use jobs_driver::{Capabilities, Capability};
///
/// let sqlite_like = Capabilities::NONE.with(Capability::Returning);
/// assert!(sqlite_like.has(Capability::Returning));
/// assert_eq!(sqlite_like.missing(&[Capability::ListenNotify, Capability::Returning]), vec![Capability::ListenNotify]);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities(u32);

impl Capabilities {
    /// No capability at all.
    pub const NONE: Capabilities = Capabilities(0);

    /// Every capability.
    pub const ALL: Capabilities = {
        let mut set = Capabilities::NONE;
        let mut i = 0;
        while i < Capability::ALL.len() {
            set = set.with(Capability::ALL[i]);
            i += 1;
        }
        set
    };

    /// This set and `capability`.
    pub const fn with(self, capability: Capability) -> Capabilities {
        Capabilities(self.0 | capability.bit())
    }

    /// This set without `capability`.
    pub const fn without(self, capability: Capability) -> Capabilities {
        Capabilities(self.0 & !capability.bit())
    }

    /// Whether the set holds `capability`.
    pub const fn has(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// Those of `needed` the set lacks, in order.
    pub fn missing(self, needed: &[Capability]) -> Vec<Capability> {
        needed.iter().copied().filter(|c| !self.has(*c)).collect()
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(Capability::ALL.iter().filter(|c| self.has(**c))).finish()
    }
}
