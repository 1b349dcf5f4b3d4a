//! The application's own values (a mail client, a config) reach its jobs.

use std::sync::Arc;

use jobs_core::Error;
use jobs_core::driver::JobState;

use crate::TestDb;
use crate::jobs::{Greeting, Outbox, greet};

/// A job takes two of the application's values as `Data<T>` parameters: the worker given
/// them runs it with them (the app keeps sharing its own `Arc`). A worker serving the
/// job's queue without one refuses to start, naming the job and the type; a worker that
/// does not serve that queue needs neither.
pub async fn jobs_reach_the_applications_values(db: TestDb) {
    let outbox = Arc::new(Outbox::default());
    let worker = db
        .worker()
        .queue("app", 2)
        .data_arc(outbox.clone())
        .data(Greeting { from: "the shop".into() })
        .build()
        .expect("a worker with both values");
    let handle = worker.start().await.expect("start");
    let job = greet::enqueue(&db.driver, "ada".to_owned()).await.expect("enqueue");
    let row = db.wait_state(job.id, JobState::Completed).await;
    assert_eq!(row.result, Some(serde_json::json!("hello ada, from the shop")));
    assert_eq!(*outbox.sent.lock().unwrap_or_else(|e| e.into_inner()), ["hello ada, from the shop"]);
    handle.shutdown().await.expect("shutdown");

    let missing = db.worker().queue("app", 2).data(Greeting { from: "x".into() }).build();
    let Err(e @ Error::MissingData { .. }) = missing else { panic!("expected MissingData, got {missing:?}") };
    let message = e.to_string();
    assert!(message.contains("conformance.greet") && message.contains("Outbox"), "{message}");
    assert!(message.contains(".data(value)"), "says how: {message}");
    db.worker().build().expect("a worker that does not serve `app` needs neither value");
}
