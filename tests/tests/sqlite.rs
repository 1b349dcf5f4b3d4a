//! What is particular to SQLite: enqueueing inside the application's transaction on its
//! async (`SyncConnectionWrapper`) and sync (`SqliteConnection`) connections; wake-ups
//! that reach another process's workers through `job_notifications`; a busy database
//! waited on, never a failed job; refused in-memory URLs. The behaviour every backend
//! shares is in the conformance suite (`conformance_sqlite.rs`).

use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel_async::{AsyncConnection, SimpleAsyncConnection};
use jobs_core::driver::{Driver, JobGetParams, Notification};
use jobs_core::sqlite::{ConnectionSettings, SqliteDriver, connect_sync};
use jobs_core::testing::{SqliteTestDatabase, wait_for};
use jobs_core::{IntoDriver, JobContext, JobState, Worker, job};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Note {
    text: String,
}

#[job(kind = "sqlite.note", queue = "notes")]
async fn note(_ctx: JobContext, args: Note) -> Result<String, std::io::Error> {
    Ok(format!("noted {}", args.text))
}

const DEADLINE: Duration = Duration::from_secs(30);

fn note_args(text: &str) -> Note {
    Note { text: text.into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_connection_enqueues_inside_its_transaction() {
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(4).expect("driver");
    let mut conn = db.connect().await.expect("connect");
    conn.batch_execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        .await
        .expect("table");

    // Rolled back: neither the row nor the job.
    let rolled_back: Result<(), jobs_core::Error> = conn
        .transaction(async |tx| {
            tx.batch_execute("INSERT INTO notes (text) VALUES ('lost')").await?;
            note::enqueue(&mut *tx, note_args("lost")).await?;
            Err(jobs_core::Error::Pool("the request failed later".into()))
        })
        .await;
    assert!(rolled_back.is_err());
    // Committed: both.
    let kept = conn
        .transaction(async |tx| {
            tx.batch_execute("INSERT INTO notes (text) VALUES ('kept')").await?;
            note::enqueue(&mut *tx, note_args("kept")).await
        })
        .await
        .expect("commit");
    let rows = jobs_core::driver::JobFilter::default();
    let all = driver
        .job_list(jobs_core::driver::JobListParams { filter: &rows, before: None, limit: 10 })
        .await
        .expect("list");
    assert_eq!(all.iter().map(|j| j.id).collect::<Vec<_>>(), vec![kept.id], "only the committed job exists");
    assert_eq!(all[0].args["text"], "kept");
    let row = jobs_core::get_job(&mut conn, kept.id).await.expect("get").expect("the job");
    assert_eq!(row.state, JobState::Available);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_connection_enqueues_inside_its_transaction() {
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(4).expect("driver");
    let path = db.path().to_path_buf();
    let ids = tokio::task::spawn_blocking(move || {
        let mut conn = SqliteConnection::establish(&path.to_string_lossy()).expect("connect");
        conn.batch_execute("PRAGMA busy_timeout = 5000").expect("busy timeout");
        let rolled_back: Result<(), jobs_core::Error> = conn.transaction(|tx| {
            note::enqueue_sync(tx, note_args("lost"))?;
            Err(jobs_core::Error::Pool("rejected later".into()))
        });
        assert!(rolled_back.is_err());
        conn.transaction(|tx| -> Result<Vec<i64>, jobs_core::Error> {
            let a = note::enqueue_sync(tx, note_args("a"))?;
            let b = note::enqueue_sync(tx, note_args("b"))?;
            Ok(vec![a.id, b.id])
        })
        .expect("commit")
    })
    .await
    .expect("thread");
    assert_eq!(ids.len(), 2);
    for id in &ids {
        let row = driver.job_get(JobGetParams { id: *id }).await.expect("get").expect("the job");
        assert_eq!(row.state, JobState::Available);
    }
    let waiting = driver
        .job_list_waiting(jobs_core::driver::JobListWaitingParams {
            kind: Some("sqlite.note"),
            ..Default::default()
        })
        .await
        .expect("waiting");
    assert_eq!(waiting.len(), 2, "the rolled-back job never existed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_from_another_process_wakes_an_idle_worker_within_the_notification_poll() {
    let db = SqliteTestDatabase::new().await.expect("database");
    // The worker polls once an hour: only a notification can wake it.
    let worker = Worker::builder(db.driver(4).expect("driver"))
        .queue("notes", 2)
        .poll_interval(Duration::from_secs(3600))
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    // Its first claim (at start) found nothing; from now on only a notification wakes it.
    wait_for("the first claim", DEADLINE, || async { (worker.fetch_count("notes") >= 1).then_some(()) })
        .await;
    // Another process's connection: a plain sync connection, not the worker's driver, so
    // nothing reaches the worker in-process.
    let path = db.path().to_path_buf();
    let committed = std::time::Instant::now();
    let id = tokio::task::spawn_blocking(move || {
        let mut conn = connect_sync(&path).expect("connect");
        note::enqueue_sync(&mut conn, note_args("across")).expect("enqueue").id
    })
    .await
    .expect("thread");
    let driver = db.driver(2).expect("driver");
    wait_for("the job to complete", DEADLINE, || async {
        let row = driver.job_get(JobGetParams { id }).await.ok()??;
        (row.state == JobState::Completed).then_some(())
    })
    .await;
    println!("picked up {:?} after the other process committed", committed.elapsed());
    worker.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_reach_a_listener_in_this_process_at_once_and_from_others_through_the_table() {
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(4).expect("driver").notification_poll(Duration::from_millis(10)).expect("poll");
    let mut listener = driver.listen().await.expect("listen").expect("a listener");
    // This process, through the driver.
    driver
        .queue_set_paused(jobs_core::driver::QueueSetPausedParams { queue: "notes", paused: true })
        .await
        .expect("pause");
    let heard =
        tokio::time::timeout(DEADLINE, listener.next()).await.expect("in time").expect("a notification");
    assert_eq!(heard, Notification::QueuePaused { queue: "notes".into(), paused: true });
    // Another connection, as another process would: only the table carries it.
    let path = db.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut conn = connect_sync(&path).expect("connect");
        note::enqueue_sync(&mut conn, note_args("x")).expect("enqueue");
    })
    .await
    .expect("thread");
    let heard = loop {
        let n =
            tokio::time::timeout(DEADLINE, listener.next()).await.expect("in time").expect("a notification");
        // The pause may be read back from the table too.
        if !matches!(n, Notification::QueuePaused { .. }) {
            break n;
        }
    };
    assert_eq!(heard, Notification::JobsAvailable { queue: "notes".into() });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_held_by_another_writer_past_the_busy_timeout_is_retried_and_no_job_fails() {
    let db = SqliteTestDatabase::new().await.expect("database");
    // Claims and completions give up waiting for the lock after 50 ms ("database is
    // locked"), far sooner than the other writer lets go.
    let settings =
        ConnectionSettings { busy_timeout: Duration::from_millis(50), ..ConnectionSettings::default() };
    let driver = SqliteDriver::open_with(&db.url(), 4, settings).expect("driver").into_driver();
    let ids: Vec<i64> =
        jobs_core::enqueue_many(&driver, (0..20).map(|i| note::build(note_args(&i.to_string()))))
            .await
            .expect("enqueue")
            .iter()
            .map(|e| e.id)
            .collect();
    // Another process takes the write lock and holds it for a second, twenty times the
    // busy timeout.
    let path = db.path().to_path_buf();
    let (locked_tx, locked_rx) = tokio::sync::oneshot::channel();
    let holder = tokio::task::spawn_blocking(move || {
        let mut conn = connect_sync(&path).expect("connect");
        conn.batch_execute("BEGIN IMMEDIATE").expect("lock");
        let _ = locked_tx.send(());
        std::thread::sleep(Duration::from_secs(1));
        conn.batch_execute("COMMIT").expect("unlock");
    });
    locked_rx.await.expect("locked");
    let worker = Worker::builder(driver.clone())
        .queue("notes", 5)
        .poll_interval(Duration::from_millis(50))
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    holder.await.expect("holder");
    for id in ids {
        wait_for(&format!("job {id} to complete"), DEADLINE, || async {
            let row = driver.job_get(JobGetParams { id }).await.ok()??;
            assert!(row.errors.as_array().is_some_and(|e| e.is_empty()), "no attempt failed: {row:?}");
            (row.state == JobState::Completed && row.attempt == 1).then_some(())
        })
        .await;
    }
    worker.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uniform_and_mixed_batches_store_the_same_rows() {
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(2).expect("driver");
    let args = [
        r#"{"a": 1, "b": [1, 2]}"#,
        r#"[1, "x"]"#,
        r#""text with \"quotes\"""#,
        "7",
        "-9223372036854775808",
        "2.5",
        "1e300",
        "true",
        "false",
        "null",
    ];
    let job = |args: &str| jobs_core::NewJob::new("sqlite.shape", "shapes", args);
    // One kind, queue and options: the batch goes as one statement.
    let uniform: Vec<_> = args.iter().map(|a| job(a)).collect();
    // The same rows with one that differs: every row goes on its own.
    let mut mixed = uniform.clone();
    mixed.push(jobs_core::NewJob { priority: 3, ..job("{}") });
    let mut stored = Vec::new();
    for batch in [&uniform, &mixed] {
        let inserted = driver
            .job_insert_many(jobs_core::driver::JobInsertManyParams { jobs: batch, now: None })
            .await
            .expect("insert");
        let ids: Vec<i64> = inserted.iter().map(|i| i.id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids ascend with the input: {ids:?}");
        let mut rows = Vec::new();
        for id in ids {
            rows.push(driver.job_get(JobGetParams { id }).await.expect("get").expect("the job"));
        }
        stored.push(rows);
    }
    for (i, (u, m)) in stored[0].iter().zip(&stored[1]).enumerate() {
        let expected: serde_json::Value = serde_json::from_str(args[i]).expect("json");
        assert_eq!((&u.args, &m.args), (&expected, &expected), "arguments {}", args[i]);
        assert_eq!((u.state, u.priority, &u.queue), (m.state, m.priority, &m.queue));
    }
}

#[test]
fn an_in_memory_database_is_refused_with_the_reason() {
    for url in ["sqlite://:memory:", ":memory:", "sqlite://"] {
        let err = SqliteDriver::open(url, 2).expect_err("refused");
        assert!(err.to_string().contains("in-memory database is one per connection"), "{url}: {err}");
    }
    let err = jobs_core::driver_for_url("sqlite://:memory:", 2).expect_err("refused");
    assert!(err.to_string().contains("give SQLite a file"), "{err}");
}

/// A node that another process keeps from writing (SQLite serves one writer at a time,
/// and a busy process can take the write lock again right after each commit) cannot
/// refresh its row's heartbeat, yet it lives: it holds its lock file, and its time there
/// is fresh. The rescuer leaves its jobs alone; once the lock file is free (the process
/// died), they are rescued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_node_kept_from_writing_is_not_taken_for_dead() {
    use jobs_core::driver::{
        JobClaimParams, JobInsertManyParams, JobRescueStuckParams, NewJob, NodeHeartbeatParams, NodeHold,
        NodeHoldParams,
    };
    let db = SqliteTestDatabase::new().await.expect("database");
    let node = db.driver(2).expect("driver");
    let leader = db.driver(2).expect("driver");
    let NodeHold::Held(mut lock) = node.node_hold(NodeHoldParams { node: "busy" }).await.expect("hold")
    else {
        panic!("a file lock beside the database");
    };
    let job = NewJob::new("sqlite.note", "notes", r#"{"text": "t"}"#);
    let id =
        node.job_insert_many(JobInsertManyParams { jobs: &[job], now: None }).await.expect("insert")[0].id;
    let claim = JobClaimParams {
        queue: "notes",
        limit: 1,
        node: "busy",
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    };
    assert_eq!(node.job_claim(claim).await.expect("claim").len(), 1);
    // Its row's last heartbeat got in a minute ago; its lock file's time is now.
    let queues = serde_json::json!({});
    let beat = NodeHeartbeatParams {
        node: "busy",
        host: "h",
        pid: 1,
        queues: &queues,
        kinds: &[],
        kind_options: &serde_json::json!({}),
        now: Some(chrono::Utc::now() - chrono::Duration::minutes(1)),
        lock: Some(lock.key()),
        registering: true,
    };
    node.node_heartbeat(beat).await.expect("heartbeat");
    assert!(lock.keep().await.expect("keep"));
    let rescue = JobRescueStuckParams {
        node_stale_after: Duration::from_secs(8),
        lock_lost_grace: Duration::from_secs(3),
        timeout_grace: Duration::from_secs(5),
        lost_nodes: true,
        lost_nodes_by_lock: true,
        max_node_losses: 5,
        limit: 100,
        rescuer: "leader",
        now: None,
    };
    assert!(leader.job_rescue_stuck(rescue).await.expect("rescue").is_empty(), "a live node's job stays");
    drop(lock);
    assert_eq!(leader.job_rescue_stuck(rescue).await.expect("rescue"), vec![id], "its process died");
}

/// A claim's time is read once this process holds the write lock, not when the claim was
/// asked for: a claim that waited a second for another process's write is dated when it
/// took the jobs, so the rescuer's timeout (counted from then) is not cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claims_time_is_read_once_it_holds_the_write_lock() {
    use jobs_core::driver::{JobClaimParams, JobInsertManyParams, NewJob};
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(2).expect("driver");
    let job = NewJob::new("sqlite.note", "notes", r#"{"text": "t"}"#);
    driver.job_insert_many(JobInsertManyParams { jobs: &[job], now: None }).await.expect("insert");
    let mut other = db.connect().await.expect("connect");
    other.batch_execute("BEGIN IMMEDIATE").await.expect("take the write lock");
    let claiming = tokio::spawn({
        let driver = driver.clone();
        async move {
            let claim = JobClaimParams {
                queue: "notes",
                limit: 1,
                node: "n",
                now: None,
                recurring_size: false,
                limited: false,
                declared: Default::default(),
                ended: &[],
            };
            driver.job_claim(claim).await
        }
    });
    // The other process writes for a second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let released = chrono::Utc::now();
    other.batch_execute("COMMIT").await.expect("release");
    let claimed = claiming.await.expect("join").expect("claim");
    let at = claimed[0].attempted_at;
    assert!(
        at >= released - chrono::Duration::milliseconds(20),
        "claimed at {at}, the lock freed at {released}"
    );
}
