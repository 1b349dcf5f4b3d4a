//! Many jobs in one call, options per call, and input that must be refused.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_jobs_go_in_one_statement_in_input_order() {
    let db = TestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    let requests: Vec<_> = (0..10_000).map(|i| send_welcome::build(welcome(i))).collect();
    let enqueued =
        conn.transaction(async |tx| enqueue_many(&mut *tx, requests).await).await.expect("enqueue 10,000");
    assert_eq!(enqueued.len(), 10_000);
    assert!(enqueued.windows(2).all(|w| w[0].id < w[1].id), "ids follow the input order");

    let rows = all_jobs(&mut conn).await;
    assert_eq!(rows.len(), 10_000);
    for (i, (row, e)) in rows.iter().zip(&enqueued).enumerate() {
        assert_eq!(row.id, e.id);
        assert_eq!(row.args["user_id"], serde_json::json!(i), "row {i} holds input {i}");
    }
}

/// A batch whose jobs differ only in their arguments goes in as one statement with the
/// shared options sent once; a mixed batch sends every column as an array. Both must store
/// the same rows, due times included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uniform_and_mixed_batches_store_the_same_rows() {
    let db = TestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    let now = chrono::Utc::now();
    let build = |user_id| {
        send_welcome::build(welcome(user_id))
            .queue("vip")
            .priority(3)
            .max_attempts(7)
            .timeout(Some(Duration::from_secs(9)))
            .run_in(Duration::from_secs(60))
            .meta("request_id", "r-1")
            .tag("signup")
            .tag("web")
            .to_new_job()
            .expect("valid")
    };
    let uniform: Vec<NewJob> = (1..=3).map(build).collect();
    let mut mixed = uniform.clone();
    mixed.push(NewJob::new("other.kind", "default", "{}"));

    insert_many(&mut conn, &uniform, Some(now)).await.expect("uniform batch");
    insert_many(&mut conn, &mixed, Some(now)).await.expect("mixed batch");
    let rows = all_jobs(&mut conn).await;
    assert_eq!(rows.len(), 7);
    let (first, second) = (&rows[0..3], &rows[3..6]);
    for (a, b) in first.iter().zip(second) {
        assert_eq!(JobRow { id: b.id, ..a.clone() }, *b, "the same job stored two ways");
    }
    let row = &rows[0];
    assert_eq!(
        (row.state, row.queue.as_str(), row.priority, row.max_attempts),
        (JobState::Scheduled, "vip", 3, 7)
    );
    assert_eq!(row.timeout_ms, Some(9_000));
    assert_eq!(row.tags, ["onboarding", "signup", "web"], "the kind's tag and the call's");
    assert_eq!(row.meta["request_id"], "r-1");
    assert_eq!(row.args["user_id"], 1);
    assert_eq!(row.scheduled_at, row.created_at + chrono::TimeDelta::seconds(60));
    assert_eq!(rows[6].state, JobState::Available, "the odd one out is due now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_call_options_override_the_kinds_defaults() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let mut conn = db.connect().await.expect("connect");

    let later = send_welcome::build(welcome(1))
        .queue("mail-bulk")
        .priority(-3)
        .max_attempts(1)
        .timeout(None)
        .run_in(Duration::from_secs(3600))
        .tag("campaign:42")
        .meta("user_id", 1)
        .enqueue(&pool)
        .await
        .expect("enqueue");
    let at = chrono::Utc::now() + chrono::Duration::days(2);
    let dated = send_welcome::build(welcome(2)).run_at(at).enqueue(&pool).await.expect("enqueue");

    let row = jobs_core::get_job(&mut conn, later.id).await.expect("get").expect("row");
    assert_eq!(row.state, JobState::Scheduled);
    assert_eq!(
        (row.queue.as_str(), row.priority, row.max_attempts, row.timeout_ms),
        ("mail-bulk", -3, 1, None)
    );
    assert_eq!(row.tags, vec!["campaign:42".to_owned(), "onboarding".to_owned()]);
    let delay = row.scheduled_at - row.created_at;
    assert_eq!(delay.num_seconds(), 3600, "run_in counts from the insert on the database clock");

    let row = jobs_core::get_job(&mut conn, dated.id).await.expect("get").expect("row");
    assert_eq!(row.state, JobState::Scheduled);
    assert_eq!(row.scheduled_at.timestamp_micros(), at.timestamp_micros());

    let options = send_welcome::options();
    assert!(matches!(
        options.backoff,
        Backoff::Exponential { base, max } if base == Duration::from_secs(2) && max == Duration::from_secs(600)
    ));
    assert_eq!(<nightly_cleanup as Job>::options().queue, "default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error_and_inserts_nothing() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let mut conn = db.connect().await.expect("connect");

    let huge = Welcome { user_id: 1, email: "x".repeat(jobs_core::MAX_PAYLOAD_BYTES) };
    let err = send_welcome::enqueue(&pool, huge).await.expect_err("too large");
    assert!(
        matches!(err, Error::PayloadTooLarge { ref kind, .. } if kind == "enqueue::send_welcome"),
        "{err}"
    );

    let err = send_welcome::build(welcome(1)).queue("").enqueue(&pool).await.expect_err("empty queue");
    assert!(matches!(err, Error::InvalidOption { option: "queue", .. }), "{err}");
    let err = send_welcome::build(welcome(1)).tag("no spaces").enqueue(&pool).await.expect_err("bad tag");
    assert!(matches!(err, Error::InvalidOption { option: "tag", .. }), "{err}");
    let err = send_welcome::build(welcome(1)).max_attempts(0).enqueue(&pool).await.expect_err("no attempts");
    assert!(matches!(err, Error::InvalidOption { option: "max_attempts", .. }), "{err}");

    // One bad job in a batch rejects the batch before anything is written.
    let batch = vec![send_welcome::build(welcome(1)), send_welcome::build(welcome(2)).queue("")];
    assert!(enqueue_many(&pool, batch).await.is_err());

    // Rows built by hand get the same checks, in code: the table only checks finish times.
    let raw = || NewJob::new("raw.kind", "default", "{}");
    let cases: [(NewJob, &str); 5] = [
        (NewJob { kind: "".into(), ..raw() }, "kind"),
        (NewJob { kind: "k".repeat(256).into(), ..raw() }, "kind"),
        (NewJob { queue: "q".repeat(129).into(), ..raw() }, "queue"),
        (NewJob { max_attempts: 0, ..raw() }, "max_attempts"),
        (NewJob { timeout_ms: Some(0), ..raw() }, "timeout"),
    ];
    for (job, expected) in cases {
        let err = enqueue_many(&pool, [raw(), job]).await.expect_err(expected);
        assert!(
            matches!(err, Error::InvalidOption { option, .. } if option == expected),
            "{expected}: {err}"
        );
    }
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM jobs").await, 0);
}

mod partition_keys {
    use jobs_core::{Error, JobContext, job};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct Export {
        customer: Customer,
        month: String,
    }

    #[derive(Serialize, Deserialize)]
    struct Customer {
        id: serde_json::Value,
    }

    #[job(kind = "keys.export", queue = "exports", limit = 1, partition_by = "customer.id")]
    async fn export(_ctx: JobContext, _args: Export) -> Result<(), std::io::Error> {
        Ok(())
    }

    #[job(kind = "keys.tenant", queue = "tenants", partition_by = "meta.tenant")]
    async fn by_tenant(_ctx: JobContext, _args: String) -> Result<(), std::io::Error> {
        Ok(())
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Renamed {
        customer_id: Option<String>,
    }

    #[job(kind = "keys.renamed", queue = "renamed", partition_by = "customer_id")]
    async fn renamed(_ctx: JobContext, _args: Renamed) -> Result<(), std::io::Error> {
        Ok(())
    }

    #[job(kind = "keys.pair", queue = "pairs", partition_by = "1")]
    async fn pair(_ctx: JobContext, _args: (i64, String)) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn export_of(id: serde_json::Value) -> Export {
        Export { customer: Customer { id }, month: "2026-11".into() }
    }

    fn key_of(meta: &str) -> Option<String> {
        jobs_core::driver::partition::partition_key_of(meta)
    }

    /// The key comes from the argument field (a string as it is, a number as written), a
    /// metadata entry, a tuple's field or the request; a missing one leaves the job
    /// unkeyed; a bad one is a typed error naming `partition_key`.
    #[test]
    fn partition_keys_come_from_the_kinds_declaration_or_the_request() {
        let job = export::build(export_of("acme".into())).to_new_job().expect("job");
        assert_eq!(key_of(&job.meta), Some("acme".into()));
        let job = export::build(export_of(42.into())).to_new_job().expect("job");
        assert_eq!(key_of(&job.meta), Some("42".into()));
        let job = export::build(export_of(serde_json::Value::Null)).to_new_job().expect("job");
        assert_eq!(key_of(&job.meta), None, "a null field: no key");
        let job = export::build(export_of(7.into())).partition_key("override").to_new_job().expect("job");
        assert_eq!(key_of(&job.meta), Some("override".into()));

        let job = by_tenant::build("x".into()).meta("tenant", "t-9").to_new_job().expect("job");
        assert_eq!(key_of(&job.meta), Some("t-9".into()));
        let meta: serde_json::Value = serde_json::from_str(&job.meta).expect("meta");
        assert_eq!(meta["tenant"], "t-9", "the application's entry is kept");
        assert_eq!(key_of(&by_tenant::build("x".into()).to_new_job().expect("job").meta), None);

        let job = pair::build((1, "second".into())).to_new_job().expect("job");
        assert_eq!(key_of(&job.meta), Some("second".into()), "a tuple's field by its index");

        for bad in ["", "trailing ", "x".repeat(256).as_str(), "tab\there"] {
            match export::build(export_of(7.into())).partition_key(bad).to_new_job() {
                Err(Error::InvalidOption { option: "partition_key", .. }) => {}
                other => panic!("{bad:?}: expected InvalidOption, got {other:?}"),
            }
        }
        match export::build(export_of(" padded".into())).to_new_job() {
            Err(Error::InvalidOption { option: "partition_key", .. }) => {}
            other => panic!("a bad key from a field: expected InvalidOption, got {other:?}"),
        }
        // A field serde renamed is not where the declaration says: refused, not unkeyed.
        match renamed::build(Renamed { customer_id: Some("acme".into()) }).to_new_job() {
            Err(Error::InvalidOption { option: "partition_by", reason }) => {
                assert!(reason.contains("customer_id") && reason.contains("partition_key"), "{reason}")
            }
            other => panic!("a renamed field: expected InvalidOption, got {other:?}"),
        }
        let job = renamed::build(Renamed { customer_id: Some("acme".into()) })
            .partition_key("acme")
            .to_new_job()
            .expect("an explicit key");
        assert_eq!(key_of(&job.meta), Some("acme".into()));
    }
}
