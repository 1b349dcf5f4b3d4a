//! The jobs the suite runs, and the in-process ledger their runs are recorded in (the
//! workers run in the test's process; each case has a ledger of its own).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jobs_core::{Data, JobContext, Outcome, Registry, job};
use serde::{Deserialize, Serialize};

/// One run of [`record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The job.
    pub job: i64,
    /// Its attempt.
    pub attempt: i32,
    /// The `n` it was given.
    pub n: i64,
    /// The node that ran it.
    pub node: String,
}

static LEDGERS: Mutex<Option<HashMap<u64, Vec<Run>>>> = Mutex::new(None);

/// When one [`nap`] ran: from its start to the end of its nap.
type Span = (Instant, Instant);

/// Every [`nap`]'s span, by ledger.
static SPANS: Mutex<Option<HashMap<u64, Vec<Span>>>> = Mutex::new(None);

/// The runs of one case's [`record`] jobs.
#[derive(Debug)]
pub struct Ledger(u64);

impl Ledger {
    /// A new, empty ledger.
    pub fn new() -> Ledger {
        Ledger(rand::random())
    }

    /// The arguments of a [`record`] job writing `n` to this ledger.
    pub fn record(&self, n: i64) -> Record {
        Record { ledger: self.0, n }
    }

    /// The arguments of a [`nap`] job recording `n` to this ledger, then sleeping `ms`.
    pub fn nap(&self, n: i64, ms: u64) -> Nap {
        Nap { ledger: self.0, n, ms }
    }

    /// The most [`nap`] jobs of this ledger that were ever running at once in this
    /// process (from each one's start to the end of its nap).
    pub fn most_at_once(&self) -> usize {
        let spans = SPANS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|s| s.get(&self.0).cloned())
            .unwrap_or_default();
        // Ends sort before starts at the same instant: touching spans do not overlap.
        let mut edges: Vec<(Instant, i32)> = spans.iter().flat_map(|&(a, b)| [(a, 1), (b, -1)]).collect();
        edges.sort();
        let (mut now, mut most) = (0i32, 0i32);
        for (_, step) in edges {
            now += step;
            most = most.max(now);
        }
        usize::try_from(most).unwrap_or(0)
    }

    /// Every run so far, in the order they started.
    pub fn runs(&self) -> Vec<Run> {
        LEDGERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|l| l.get(&self.0).cloned())
            .unwrap_or_default()
    }
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new()
    }
}

/// The arguments of [`record`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    ledger: u64,
    n: i64,
}

fn note(ctx: &JobContext, ledger: u64, n: i64) {
    let run = Run { job: ctx.id(), attempt: ctx.attempt(), n, node: ctx.node().to_owned() };
    LEDGERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_default()
        .entry(ledger)
        .or_default()
        .push(run);
}

/// Records its run in the ledger and returns `n`.
#[job(kind = "conformance.record", queue = "work")]
pub async fn record(ctx: JobContext, args: Record) -> Result<i64, std::io::Error> {
    note(&ctx, args.ledger, args.n);
    Ok(args.n)
}

/// Records its run in the ledger with `n` the sum of its completed [`record`]
/// dependencies' results (a workflow's fan-in), and returns that sum.
#[job(kind = "conformance.sum_dependencies", queue = "work")]
pub async fn sum_dependencies(ctx: JobContext, args: Record) -> Result<i64, jobs_core::Error> {
    let sum = ctx.dependency_results::<record>().await?.iter().map(|(_, n)| n).sum();
    note(&ctx, args.ledger, sum);
    Ok(sum)
}

/// The arguments of [`nap`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Nap {
    ledger: u64,
    n: i64,
    ms: u64,
}

/// Records its run in the ledger, then takes `ms` to finish: a job that takes a while.
/// Its timeout is 300 ms.
#[job(kind = "conformance.nap", queue = "work", timeout = "300ms")]
pub async fn nap(ctx: JobContext, args: Nap) -> Result<i64, std::io::Error> {
    let started = Instant::now();
    note(&ctx, args.ledger, args.n);
    tokio::time::sleep(Duration::from_millis(args.ms)).await;
    SPANS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_default()
        .entry(args.ledger)
        .or_default()
        .push((started, Instant::now()));
    Ok(args.n)
}

/// Gates [`gated`] jobs wait at, by ledger and attempt: open, every run of that attempt
/// waiting there goes on.
type Gates = HashMap<(u64, i32), std::sync::Arc<tokio::sync::Notify>>;
static GATES: Mutex<Option<Gates>> = Mutex::new(None);

fn gate(ledger: u64, attempt: i32) -> std::sync::Arc<tokio::sync::Notify> {
    let mut gates = GATES.lock().unwrap_or_else(|e| e.into_inner());
    gates.get_or_insert_default().entry((ledger, attempt)).or_default().clone()
}

impl Ledger {
    /// The arguments of a [`gated`] job recording `n` to this ledger, then waiting for
    /// [`open_gate`](Self::open_gate).
    pub fn gated(&self, n: i64) -> Record {
        self.record(n)
    }

    /// Lets every [`gated`] run of this ledger at `attempt` waiting now finish.
    pub fn open_gate(&self, attempt: i32) {
        gate(self.0, attempt).notify_waiters();
    }
}

/// Records its run in the ledger, then waits until the case opens the ledger's gate
/// for its attempt ([`Ledger::open_gate`]) or the run is cancelled; returns `n`. One
/// attempt only, and no timeout.
#[job(kind = "conformance.gated", queue = "work", max_attempts = 1)]
pub async fn gated(ctx: JobContext, args: Record) -> Result<i64, std::io::Error> {
    let gate = gate(args.ledger, ctx.attempt());
    let opened = gate.notified();
    note(&ctx, args.ledger, args.n);
    tokio::select! {
        _ = opened => Ok(args.n),
        _ = ctx.cancelled() => Err(std::io::Error::other("cancelled while waiting at the gate")),
    }
}

/// Records its run in the ledger and returns `n`: one attempt only (`max_attempts = 1`).
#[job(kind = "conformance.once", queue = "work", max_attempts = 1)]
pub async fn once(ctx: JobContext, args: Record) -> Result<i64, std::io::Error> {
    note(&ctx, args.ledger, args.n);
    Ok(args.n)
}

/// What [`behave`] does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Behaviour {
    /// Returns an error.
    Fail,
    /// Panics.
    Panic,
    /// Never finishes (its timeout is 300 ms).
    Hang,
    /// Snoozes for an hour.
    Snooze,
    /// Cancels itself.
    Cancel,
    /// Discards itself.
    Discard,
    /// Completes with `"done"`.
    Succeed,
}

/// The error [`behave`] fails with.
#[derive(Debug, thiserror::Error)]
#[error("card declined")]
pub struct Declined;

/// Behaves as told: three attempts, a 300 ms timeout, backoff from 10 s.
#[job(kind = "conformance.behave", queue = "work", max_attempts = 3, timeout = "300ms",
      backoff = exponential(base = "10s", max = "1h"))]
pub async fn behave(ctx: JobContext, args: Behaviour) -> Result<Outcome<&'static str>, Declined> {
    match args {
        Behaviour::Fail => Err(Declined),
        Behaviour::Panic => panic!("boom at attempt {}", ctx.attempt()),
        Behaviour::Hang => {
            std::future::pending::<()>().await;
            Ok(Outcome::Complete("unreachable"))
        }
        Behaviour::Snooze => Ok(Outcome::snooze(Duration::from_secs(3600))),
        Behaviour::Cancel => Ok(Outcome::cancel("customer left")),
        Behaviour::Discard => Ok(Outcome::discard("bad address")),
        Behaviour::Succeed => Ok(Outcome::Complete("done")),
    }
}

/// Waits until cancelled; never times out by itself.
#[job(kind = "conformance.wait", queue = "work")]
pub async fn wait_until_cancelled(ctx: JobContext) -> Result<(), std::io::Error> {
    ctx.cancelled().await;
    Ok(())
}

/// A cron job: returns its label.
#[job(kind = "conformance.tick", queue = "periodic", max_attempts = 2)]
pub async fn tick(_ctx: JobContext, label: String) -> Result<String, std::io::Error> {
    Ok(label)
}

/// The arguments of [`sync_account`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sync {
    /// The key.
    pub account: i64,
    /// Not part of the key.
    pub full: bool,
}

/// Unique by account while pending.
#[job(
    kind = "conformance.sync_account",
    unique(fields(account), states(available, scheduled, running, retryable))
)]
pub async fn sync_account(_ctx: JobContext, _args: Sync) -> Result<(), std::io::Error> {
    Ok(())
}

/// Unique by day while pending and once completed: a day's report is made once, ever.
#[job(
    kind = "conformance.daily_report",
    queue = "work",
    unique(fields(day), states(available, scheduled, running, retryable, completed))
)]
pub async fn daily_report(_ctx: JobContext, args: Report) -> Result<String, std::io::Error> {
    Ok(format!("report of {}", args.day))
}

/// The arguments of [`daily_report`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The key.
    pub day: String,
}

/// A mail client of the application's, as its jobs reach it: it keeps what it sent.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Every mail sent, in order.
    pub sent: Mutex<Vec<String>>,
}

/// The application's configuration.
#[derive(Debug)]
pub struct Greeting {
    /// Whom mails come from.
    pub from: String,
}

/// Greets `user` by mail, with the application's mail client and configuration
/// (`Data<T>` parameters, given to the worker with `.data(..)`). On a queue of its own,
/// so that the suite's other workers need neither.
#[job(kind = "conformance.greet", queue = "app")]
pub async fn greet(
    _ctx: JobContext,
    user: String,
    outbox: Data<Outbox>,
    greeting: Data<Greeting>,
) -> Result<String, std::io::Error> {
    let mail = format!("hello {user}, from {}", greeting.from);
    outbox.sent.lock().unwrap_or_else(|e| e.into_inner()).push(mail.clone());
    Ok(mail)
}

/// The suite's jobs, registered explicitly (not through `inventory`, so that the suite
/// runs the same whatever else the test binary links).
pub fn registry() -> Registry {
    Registry::new()
        .with::<record>()
        .and_then(|r| r.with::<nap>())
        .and_then(|r| r.with::<behave>())
        .and_then(|r| r.with::<wait_until_cancelled>())
        .and_then(|r| r.with::<tick>())
        .and_then(|r| r.with::<sync_account>())
        .and_then(|r| r.with::<daily_report>())
        .and_then(|r| r.with::<gated>())
        .and_then(|r| r.with::<once>())
        .and_then(|r| r.with::<greet>())
        .and_then(|r| r.with::<sum_dependencies>())
        .and_then(|r| r.with::<crate::keyed::export>())
        .expect("the suite's kinds are distinct")
}
