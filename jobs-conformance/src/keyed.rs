//! The suite's job with a partition key ([`export`]: per customer, at most 2 at once by
//! its own declaration) and the in-process tally of its runs: how many ran at once, per
//! key and in all, checked at every start, in which order keys started, and which jobs'
//! runs have ended.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use jobs_core::{JobContext, job};
use serde::{Deserialize, Serialize};

/// One tally's state.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Running now, per key (`""`: no key).
    running: HashMap<String, i64>,
    /// Running now, in all.
    total: i64,
    /// The most ever running at once per key.
    pub most_per_key: HashMap<String, i64>,
    /// The most ever running at once in all.
    pub most_total: i64,
    /// Each run's key, in the order they started.
    pub starts: Vec<String>,
    /// The jobs whose run has ended (their handler returned; the outcome may not be
    /// written yet, and the row may still read `running`).
    pub ended: HashSet<i64>,
}

static TALLIES: Mutex<Option<HashMap<u64, Tally>>> = Mutex::new(None);

/// The runs of one case's [`export`] jobs.
#[derive(Debug, Clone)]
pub struct Tallied(u64);

impl Tallied {
    /// A new, empty tally.
    pub fn new() -> Tallied {
        Tallied(rand::random())
    }

    /// The arguments of an [`export`] for `customer` (none: no key) taking `ms`.
    pub fn export(&self, customer: Option<&str>, ms: u64) -> Export {
        Export { tally: self.0, customer: customer.map(str::to_owned), ms }
    }

    /// The tally so far.
    pub fn read(&self) -> Tally {
        let tallies = TALLIES.lock().unwrap_or_else(|e| e.into_inner());
        tallies.as_ref().and_then(|t| t.get(&self.0).cloned()).unwrap_or_default()
    }

    /// The most runs of one key at once.
    pub fn most_of_one_key(&self) -> i64 {
        self.read().most_per_key.values().copied().max().unwrap_or(0)
    }
}

impl Default for Tallied {
    fn default() -> Self {
        Tallied::new()
    }
}

fn step(tally: u64, job: i64, key: &str, by: i64) {
    let mut tallies = TALLIES.lock().unwrap_or_else(|e| e.into_inner());
    let t = tallies.get_or_insert_default().entry(tally).or_default();
    if by < 0 {
        t.ended.insert(job);
    }
    let running = t.running.entry(key.to_owned()).or_default();
    *running += by;
    let now = *running;
    t.total += by;
    if by > 0 {
        t.starts.push(key.to_owned());
        let most = t.most_per_key.entry(key.to_owned()).or_default();
        *most = (*most).max(now);
        t.most_total = t.most_total.max(t.total);
    }
}

/// The arguments of [`export`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Export {
    tally: u64,
    /// The partition key.
    pub customer: Option<String>,
    ms: u64,
}

/// A customer's export: counts itself running under its key for `ms`. At most 2 per
/// customer at once, declared on the kind.
#[job(kind = "conformance.export", queue = "exports", limit = 2, partition_by = "customer")]
pub async fn export(ctx: JobContext, args: Export) -> Result<(), std::io::Error> {
    let key = args.customer.clone().unwrap_or_default();
    step(args.tally, ctx.id(), &key, 1);
    tokio::time::sleep(Duration::from_millis(args.ms)).await;
    step(args.tally, ctx.id(), &key, -1);
    Ok(())
}
