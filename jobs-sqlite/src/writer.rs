//! This process's one writer per database file: a thread with a connection of its own
//! that runs the driver's writes (claims, completions, inserts, heartbeats, the leader's
//! statements) in group transactions.
//!
//! SQLite takes one writer at a time, and each commit waits for the disk (`synchronous =
//! FULL`). Writes that arrive while a transaction is running wait in a queue; the writer
//! then runs all of them (up to [`MAX_GROUP`]) in one `BEGIN IMMEDIATE` … `COMMIT`, each in
//! a savepoint of its own, so one failing rolls back alone and the others commit. Every
//! caller hears back only after the commit: what it wrote is durable. One disk flush then
//! serves many writes — eight tasks enqueueing at once share their commits — and no write
//! of this process ever waits in SQLite's busy handler behind another of its own.

use std::sync::mpsc;

use diesel::{Connection, SqliteConnection};
use jobs_driver::{DriverError, Result};
use tokio::sync::oneshot;

/// The most writes one transaction groups.
pub(crate) const MAX_GROUP: usize = 256;

/// A write waiting for the writer.
trait Job: Send {
    /// Runs it; its result waits for the commit.
    fn run(self: Box<Self>, conn: &mut SqliteConnection) -> Box<dyn Pending>;
    /// Tells its caller it could not run (the database could not be locked).
    fn refuse(self: Box<Self>, message: &str);
}

/// A write's result, held until its transaction commits (or fails to).
trait Pending: Send {
    /// Whether the write succeeded (its savepoint is released) or not (rolled back).
    fn succeeded(&self) -> bool;
    /// Hands the result over: the write's own, or `commit`'s error.
    fn deliver(self: Box<Self>, commit: std::result::Result<(), &str>);
}

struct Write<F, R> {
    op: F,
    reply: oneshot::Sender<Result<R>>,
}

impl<F, R> Job for Write<F, R>
where
    F: FnOnce(&mut SqliteConnection) -> Result<R> + Send,
    R: Send + 'static,
{
    fn run(self: Box<Self>, conn: &mut SqliteConnection) -> Box<dyn Pending> {
        let Write { op, reply } = *self;
        Box::new(Done { outcome: op(conn), reply })
    }

    fn refuse(self: Box<Self>, message: &str) {
        let _ = self.reply.send(Err(failure(message)));
    }
}

struct Done<R> {
    outcome: Result<R>,
    reply: oneshot::Sender<Result<R>>,
}

impl<R: Send> Pending for Done<R> {
    fn succeeded(&self) -> bool {
        self.outcome.is_ok()
    }

    fn deliver(self: Box<Self>, commit: std::result::Result<(), &str>) {
        let result = match commit {
            Ok(()) => self.outcome,
            Err(e) => Err(failure(e)),
        };
        // The caller may have gone away; its write stands.
        let _ = self.reply.send(result);
    }
}

/// A database error with `message`, as diesel reports one (so that "database is locked"
/// stays a transient error the engine retries).
fn failure(message: &str) -> DriverError {
    DriverError::Database(diesel::result::Error::DatabaseError(
        diesel::result::DatabaseErrorKind::Unknown,
        Box::new(message.to_owned()),
    ))
}

/// The handle callers send writes through. The thread ends when every handle is gone.
#[derive(Debug)]
pub(crate) struct Writer {
    jobs: mpsc::Sender<Box<dyn Job>>,
}

impl Writer {
    /// Starts the writer on `conn` (opened with the driver's settings).
    pub(crate) fn start(
        conn: SqliteConnection,
        gate: std::sync::Arc<tokio::sync::Mutex<()>>,
    ) -> Result<Writer> {
        let (jobs, queue) = mpsc::channel::<Box<dyn Job>>();
        std::thread::Builder::new()
            .name("jobs-sqlite-writer".into())
            .spawn(move || run(conn, queue, gate))
            .map_err(DriverError::Io)?;
        Ok(Writer { jobs })
    }

    /// Runs `op` in the writer's next transaction; returns its result once that commits.
    pub(crate) async fn write<R, F>(&self, op: F) -> Result<R>
    where
        F: FnOnce(&mut SqliteConnection) -> Result<R> + Send + 'static,
        R: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Write { op, reply });
        self.jobs
            .send(job)
            .map_err(|_| DriverError::Runtime("the SQLite writer thread has stopped".into()))?;
        answer.await.map_err(|_| DriverError::Runtime("the SQLite writer thread stopped mid-write".into()))?
    }
}

/// The writer thread: a group of waiting writes per transaction, until the queue closes.
fn run(
    mut conn: SqliteConnection,
    queue: mpsc::Receiver<Box<dyn Job>>,
    gate: std::sync::Arc<tokio::sync::Mutex<()>>,
) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        // The async writes of this process (dashboard actions, the cron pass) run on
        // pooled connections; they take the same turn.
        let _turn = gate.blocking_lock();
        run_group(&mut conn, group);
    }
}

/// A write that failed inside its savepoint (rolled back), or the savepoint itself.
enum Failed {
    Write(Box<dyn Pending>),
    Savepoint(diesel::result::Error),
}

impl From<diesel::result::Error> for Failed {
    fn from(e: diesel::result::Error) -> Failed {
        Failed::Savepoint(e)
    }
}

/// One group: `BEGIN IMMEDIATE`, each write in a savepoint, `COMMIT` (through diesel's
/// transaction manager, so that a write's own transactions, the migration harness's say,
/// nest as savepoints).
fn run_group(conn: &mut SqliteConnection, group: Vec<Box<dyn Job>>) {
    let mut done: Vec<Box<dyn Pending>> = Vec::with_capacity(group.len());
    let mut refused: Option<String> = None;
    let mut jobs = group.into_iter();
    let committed = conn.immediate_transaction::<(), diesel::result::Error, _>(|conn| {
        for job in jobs.by_ref() {
            // A panicking write fails alone (its caller hears the writer stopped
            // mid-write); the thread and the group carry on.
            let ran =
                conn.transaction::<Box<dyn Pending>, Failed, _>(|conn| {
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(conn))) {
                        Ok(pending) if pending.succeeded() => Ok(pending),
                        Ok(pending) => Err(Failed::Write(pending)),
                        Err(_) => Err(Failed::Savepoint(diesel::result::Error::RollbackTransaction)),
                    }
                });
            match ran {
                Ok(pending) | Err(Failed::Write(pending)) => done.push(pending),
                Err(Failed::Savepoint(e)) => tracing::warn!(error = %e, "a write's savepoint failed"),
            }
        }
        Ok(())
    });
    if let Err(e) = committed {
        let message = e.to_string();
        refused = Some(message);
    }
    match refused {
        None => done.into_iter().for_each(|p| p.deliver(Ok(()))),
        Some(message) => {
            // Nothing of the group was written: the lock was not had, or the commit failed.
            done.into_iter().for_each(|p| p.deliver(Err(&message)));
            jobs.for_each(|job| job.refuse(&message));
        }
    }
}
