//! Middleware where the database matters: insert middleware changes or refuses jobs inside
//! the application's transaction (async and sync), which stays usable after a refusal;
//! run middleware nests in registration order around the handler, sees its outcome
//! (timeouts and panics included) and can fail the attempt with or without running it.

use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use jobs_core::driver::{Inserted, JobState, NewJob};
use jobs_core::middleware::{BoxError, InsertMiddleware, JobRun, Next, RunMiddleware};
use jobs_core::testing::wait_for;
use jobs_core::{Batch, Error, Failure, RunOutcome, Workflow, enqueue_many};
use serde_json::{Value, json};

use crate::TestDb;
use crate::backend::DEADLINE;
use crate::jobs::{Behaviour, Ledger, behave, record};

/// What [`Stamp`]s' `after_insert` saw: (case marker, middleware, job id), in call order.
static AFTER: Mutex<Vec<(String, &'static str, i64)>> = Mutex::new(Vec::new());

/// Insert middleware acting on jobs whose metadata names a case (`middleware_case`): it
/// appends its name to their `stamped` list, refuses those whose `refuse` names it, and
/// gives those whose `bad_tag` names it a tag no job may carry.
struct Stamp(&'static str);

impl InsertMiddleware for Stamp {
    fn before_insert(&self, job: &mut NewJob) -> Result<(), BoxError> {
        if job.meta_value("middleware_case").is_none() {
            return Ok(());
        }
        if job.meta_value("refuse").is_some_and(|v| v == self.0) {
            return Err(format!("{} refuses this one", self.0).into());
        }
        if job.meta_value("bad_tag").is_some_and(|v| v == self.0) {
            job.tags.push("not a tag!".into());
        }
        let mut stamped = job.meta_value("stamped").unwrap_or_else(|| json!([]));
        if let Some(list) = stamped.as_array_mut() {
            list.push(json!(self.0));
        }
        job.set_meta("stamped", stamped)?;
        Ok(())
    }

    fn after_insert(&self, job: &NewJob, inserted: &Inserted) {
        if let Some(Value::String(case)) = job.meta_value("middleware_case") {
            AFTER.lock().unwrap_or_else(|e| e.into_inner()).push((case, self.0, inserted.id));
        }
    }

    fn name(&self) -> &str {
        self.0
    }
}

/// The two stamps, registered once for the process (insert middleware is the process's).
fn register_stamps() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        jobs_core::middleware::add_insert_middleware(Stamp("first"));
        jobs_core::middleware::add_insert_middleware(Stamp("second"));
    });
}

/// A `record` job of `case`, with `extra` metadata entries.
fn marked(ledger: &Ledger, n: i64, case: &str, extra: &[(&str, &str)]) -> NewJob {
    let mut request = record::build(ledger.record(n)).meta("middleware_case", case).meta("n", n);
    for (key, value) in extra {
        request = request.meta(*key, *value);
    }
    request.to_new_job().expect("a valid job")
}

/// The `n`s of `case`'s stored jobs, with what each was stamped with.
async fn stored(db: &TestDb, case: &str) -> Vec<(i64, Value)> {
    let mut rows: Vec<(i64, Value)> = db
        .all_jobs()
        .await
        .into_iter()
        .filter(|row| row.meta["middleware_case"] == case)
        .map(|row| (row.meta["n"].as_i64().unwrap_or(-1), row.meta["stamped"].clone()))
        .collect();
    rows.sort_by_key(|(n, _)| *n);
    rows
}

fn after_calls(case: &str) -> Vec<(&'static str, i64)> {
    let after = AFTER.lock().unwrap_or_else(|e| e.into_inner());
    after.iter().filter(|(c, ..)| c == case).map(|(_, name, id)| (*name, *id)).collect()
}

/// Insert middleware runs in registration order on every job of an application's enqueue,
/// async and sync, and what it set is stored; `after_insert` runs in the reverse order
/// with each job's id. A refusal fails the enqueue with `InsertRefused` naming the
/// middleware, writes nothing of that insert, and leaves the transaction usable: what
/// was enqueued before and after it commits. A job a middleware made invalid is refused
/// as an invalid job is.
pub async fn insert_middleware_changes_or_refuses_jobs_in_the_applications_transaction(db: TestDb) {
    register_stamps();
    let ledger = Ledger::new();
    let case = format!("insert-{}", rand::random::<u32>());
    let stamped = json!(["first", "second"]);

    // Async: one commits with both stamps; a refused insert of two writes neither.
    let mut tx = db.app_transaction().await;
    let one = tx.enqueue(vec![marked(&ledger, 1, &case, &[])]).await.expect("enqueue");
    let refused = tx
        .enqueue(vec![marked(&ledger, 2, &case, &[]), marked(&ledger, 3, &case, &[("refuse", "second")])])
        .await;
    match refused {
        Err(Error::InsertRefused { middleware, kind, source }) => {
            assert_eq!((middleware.as_str(), kind.as_str()), ("second", "conformance.record"));
            assert_eq!(source.to_string(), "second refuses this one");
        }
        other => panic!("expected the insert refused, got {other:?}"),
    }
    let invalid = tx.enqueue(vec![marked(&ledger, 4, &case, &[("bad_tag", "first")])]).await;
    assert!(
        matches!(invalid, Err(Error::InvalidOption { .. })),
        "a job made invalid is refused: {invalid:?}"
    );
    tx.enqueue(vec![marked(&ledger, 5, &case, &[])]).await.expect("the transaction goes on");
    tx.commit().await.expect("commit");
    assert_eq!(stored(&db, &case).await, vec![(1, stamped.clone()), (5, stamped.clone())]);
    let first_id = one[0].id;
    let calls = after_calls(&case);
    assert_eq!(
        calls[..2],
        [("second", first_id), ("first", first_id)],
        "after_insert in reverse order: {calls:?}"
    );
    assert_eq!(calls.len(), 4, "after_insert only for the inserts written: {calls:?}");

    // Rolled back, what the middleware stamped never existed either.
    let mut tx = db.app_transaction().await;
    tx.enqueue(vec![marked(&ledger, 6, &case, &[])]).await.expect("enqueue");
    tx.rollback().await.expect("rollback");

    // Sync: the same rules on the application's synchronous connection.
    let mut tx = db.sync_app_transaction();
    tx.enqueue(vec![marked(&ledger, 7, &case, &[])]).expect("enqueue");
    let refused = tx.enqueue(vec![marked(&ledger, 8, &case, &[("refuse", "first")])]);
    assert!(
        matches!(&refused, Err(Error::InsertRefused { middleware, .. }) if middleware == "first"),
        "{refused:?}"
    );
    tx.commit().expect("commit");
    assert_eq!(
        stored(&db, &case).await,
        vec![(1, stamped.clone()), (5, stamped.clone()), (7, stamped.clone())]
    );

    // Through the driver (a pool's path) too; the stamped jobs run as any other.
    enqueue_many(&db.driver, vec![marked(&ledger, 9, &case, &[])]).await.expect("enqueue");
    let handle = db.worker().without_maintenance().build().expect("build").start().await.expect("start");
    for row in db.all_jobs().await.into_iter().filter(|row| row.meta["middleware_case"] == case.as_str()) {
        assert_eq!(row.meta["stamped"], stamped);
        db.wait_state(row.id, JobState::Completed).await;
    }
    handle.shutdown().await.expect("shutdown");
    let mut ran: Vec<i64> = ledger.runs().iter().map(|r| r.n).collect();
    ran.sort_unstable();
    assert_eq!(ran, [1, 5, 7, 9]);

    // A workflow's steps, and a batch's callback and members, go through it too; each
    // `after_insert` gets its own job's id.
    let marked_request = |n: i64| record::build(ledger.record(n)).meta("middleware_case", &case).meta("n", n);
    let mut workflow = Workflow::new("middleware");
    let step = workflow.add(marked_request(10));
    workflow.add_after(marked_request(11), [&step]);
    let steps = workflow.enqueue(&db.driver).await.expect("enqueue the workflow").jobs;
    let mut batch = Batch::new("middleware", marked_request(12));
    batch.add(marked_request(13));
    let batch = batch.sealed().enqueue(&db.driver).await.expect("open the batch");
    let stored_now = stored(&db, &case).await;
    let added: Vec<&(i64, Value)> = stored_now.iter().filter(|(n, _)| *n >= 10).collect();
    assert_eq!(
        added,
        [&(10, stamped.clone()), &(11, stamped.clone()), &(12, stamped.clone()), &(13, stamped.clone())]
    );
    let calls = after_calls(&case);
    let ids: Vec<i64> = calls.iter().filter(|(name, _)| *name == "first").map(|(_, id)| *id).collect();
    let expected = [steps[0].id, steps[1].id, batch.callback_id, batch.members[0].id];
    assert_eq!(ids[ids.len() - 4..], expected, "after_insert with each job's own id: {calls:?}");
}

/// What a [`Trace`] saw, in order, as `"<job> <name> <event>"`.
type Events = Arc<Mutex<Vec<String>>>;

/// Run middleware that records each job's way in and out; on jobs whose metadata says
/// so, refuses the run (`refuse`), fails a completed one (`fail_after`) or panics
/// (`panic`), when the value names it.
struct Trace {
    name: &'static str,
    events: Events,
}

impl Trace {
    fn note(&self, job: &JobRun<'_>, event: &str) {
        let line = format!("{} {} {event}", job.context.id(), self.name);
        self.events.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    fn says(&self, job: &JobRun<'_>, key: &str) -> bool {
        job.context.meta_value(key).is_some_and(|v| v == self.name)
    }
}

fn outcome_name(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Completed(_) => "completed".into(),
        RunOutcome::Failed(f) => format!("failed:{}", f.error_type),
        other => format!("{other:?}"),
    }
}

#[jobs_core::async_trait]
impl RunMiddleware for Trace {
    async fn run(&self, job: &JobRun<'_>, next: Next<'_>) -> RunOutcome {
        self.note(job, "before");
        if self.says(job, "panic") {
            panic!("{} panics at attempt {}", self.name, job.context.attempt());
        }
        if self.says(job, "refuse") {
            self.note(job, "refused");
            return RunOutcome::Failed(Failure {
                message: format!("{} refused the run", self.name),
                error_type: "refused_by_middleware".into(),
                backtrace: None,
            });
        }
        let outcome = next.run().await;
        self.note(job, &format!("after {}", outcome_name(&outcome)));
        if self.says(job, "linger") {
            std::future::pending::<()>().await;
        }
        if self.says(job, "fail_after") && matches!(outcome, RunOutcome::Completed(_)) {
            return RunOutcome::Failed(Failure {
                message: format!("{} rejected the result", self.name),
                error_type: "rejected_by_middleware".into(),
                backtrace: None,
            });
        }
        outcome
    }
}

/// A `behave` job that succeeds, with metadata `key` = `value`; its id.
async fn succeeding(db: &TestDb, key: &str, value: &str) -> i64 {
    let request = behave::build(Behaviour::Succeed).meta(key, value);
    request.enqueue(&db.driver).await.expect("enqueue").id
}

/// Run middleware nests in registration order, the first outermost, around the handler,
/// and sees its outcome, a timeout's and a panic's included. One that returns without
/// going on fails the attempt with its failure, and the handler never runs; one that
/// turns a success into a failure fails the attempt (no result kept); one that panics
/// fails it as a panic. Each such attempt is retried as a handler's failure is.
pub async fn run_middleware_nests_in_order_and_can_fail_the_attempt(db: TestDb) {
    let events: Events = Arc::default();
    let handle = db
        .worker()
        .without_maintenance()
        .middleware(Trace { name: "outer", events: events.clone() })
        .middleware(Trace { name: "inner", events: events.clone() })
        .shutdown_timeout(Duration::from_millis(300))
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let of = |id: i64| -> Vec<String> {
        let all = events.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().filter_map(|line| line.strip_prefix(&format!("{id} ")).map(str::to_owned)).collect()
    };

    let ok = behave::enqueue(&db.driver, Behaviour::Succeed).await.expect("enqueue").id;
    let done = db.wait_state(ok, JobState::Completed).await;
    assert_eq!(done.result, Some(json!("done")));
    assert_eq!(of(ok), ["outer before", "inner before", "inner after completed", "outer after completed"]);

    // Refused by the inner one: the handler never runs (its ledger stays empty).
    let ledger = Ledger::new();
    let refused = record::build(ledger.record(1))
        .meta("refuse", "inner")
        .max_attempts(2)
        .enqueue(&db.driver)
        .await
        .expect("enqueue")
        .id;
    let row = db.wait_state(refused, JobState::Retryable).await;
    assert_eq!(row.errors[0]["error_type"], "refused_by_middleware");
    assert_eq!(row.errors[0]["message"], "inner refused the run");
    assert_eq!(
        of(refused),
        ["outer before", "inner before", "inner refused", "outer after failed:refused_by_middleware"]
    );
    assert!(ledger.runs().is_empty(), "the handler did not run: {:?}", ledger.runs());

    // A success turned into a failure by the outer one: retried, no result.
    let rejected = succeeding(&db, "fail_after", "outer").await;
    let row = db.wait_state(rejected, JobState::Retryable).await;
    assert_eq!((row.errors[0]["error_type"].as_str(), row.result), (Some("rejected_by_middleware"), None));
    assert_eq!(
        of(rejected),
        ["outer before", "inner before", "inner after completed", "outer after completed"]
    );

    // A middleware's panic fails the attempt as a panic, with its message.
    let panicked = succeeding(&db, "panic", "inner").await;
    let row = db.wait_state(panicked, JobState::Retryable).await;
    assert_eq!(row.errors[0]["error_type"], "panic");
    assert_eq!(row.errors[0]["message"], "panicked: inner panics at attempt 1");
    assert_eq!(of(panicked), ["outer before", "inner before"]);

    // The handler's timeout is an outcome the middleware sees.
    let hung = behave::enqueue(&db.driver, Behaviour::Hang).await.expect("enqueue").id;
    let row = db.wait_state(hung, JobState::Retryable).await;
    assert_eq!(row.errors[0]["error_type"], "timeout");
    assert_eq!(
        of(hung),
        ["outer before", "inner before", "inner after failed:timeout", "outer after failed:timeout"]
    );

    // A shutdown while a middleware lingers after its handler ended keeps the handler's
    // outcome: handed back, the job would run again.
    let lingering = succeeding(&db, "linger", "inner").await;
    wait_for("the lingering job's handler to end", DEADLINE, || async {
        of(lingering).contains(&"inner after completed".to_owned()).then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
    let row = db.job(lingering).await;
    assert_eq!((row.state, row.result), (JobState::Completed, Some(json!("done"))));
}
