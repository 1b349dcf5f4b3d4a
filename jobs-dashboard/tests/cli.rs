//! The `jobs-dashboard` command line, run as a real process against a real Postgres.

mod test_app;

use jobs_core::JobState;
use jobs_core::NewJob;
use jobs_core::testing::TestDatabase;
use test_app::cli::cli;
use test_app::{fail, insert, state_of};

/// The id in `enqueue`'s "enqueued job N (…)".
fn enqueued_id(out: &str) -> i64 {
    out.strip_prefix("enqueued job ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("an id in {out:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_applies_the_schema_once() {
    let db = TestDatabase::empty().await.expect("db");
    let (ok, out, err) = cli(Some(db.url()), &["migrate"]);
    assert!(ok, "{err}");
    assert!(out.contains("applied 20261122000001"), "{out}");
    let (ok, out, _) = cli(Some(db.url()), &["migrate"]);
    assert!(ok);
    assert_eq!(out.trim(), "the jobs schema is up to date");
    let (ok, _, err) = cli(None, &["stats"]);
    assert!(!ok);
    assert_eq!(err.trim(), "error: no database: pass --database-url or set DATABASE_URL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_from_json_with_options_and_clear_errors() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(2).expect("pool");
    let (ok, out, err) = cli(
        Some(db.url()),
        &[
            "enqueue",
            "--kind",
            "app::send_welcome",
            "--queue",
            "mailers",
            "--args",
            r#"{"user_id": 7}"#,
            "--priority",
            "3",
            "--max-attempts",
            "4",
            "--in",
            "15m",
            "--tag",
            "cli",
            "--allow-unknown-kind",
        ],
    );
    assert!(ok, "{err}");
    assert!(err.contains("warning: no live node runs kind `app::send_welcome`"), "{err}");
    assert!(err.contains("queue mailers, 4 attempts, no timeout"), "says what the job got instead: {err}");
    let id = enqueued_id(&out);
    let mut conn = pool.get().await.expect("conn");
    let row = jobs_core::get_job(&mut conn, id).await.expect("get").expect("row");
    assert_eq!((row.kind.as_str(), row.queue.as_str()), ("app::send_welcome", "mailers"));
    assert_eq!(row.args, serde_json::json!({ "user_id": 7 }));
    assert_eq!((row.priority, row.max_attempts, row.state), (3, 4, JobState::Scheduled));
    assert_eq!(row.tags, vec!["cli".to_owned()]);
    let delay = row.scheduled_at - row.created_at;
    assert!((delay.num_seconds() - 900).abs() <= 2, "due in 15 minutes: {delay}");

    for (args, expected) in [
        (vec!["--kind", "k", "--args", "{user_id: 7}"], "error: --args is not valid JSON"),
        (vec!["--kind", "k", "--args", r#""a\u0000b""#], "contain a NUL character"),
        (vec!["--kind", "k", "--queue", ""], "error: invalid option `queue`"),
        (vec!["--kind", "k", "--tag", "no spaces"], "error: invalid option `tag`"),
        (vec!["--kind", "k", "--in", "soon"], "invalid value 'soon' for '--in"),
    ] {
        let args: Vec<&str> = ["enqueue", "--allow-unknown-kind"].into_iter().chain(args).collect();
        let (ok, _, err) = cli(Some(db.url()), &args);
        assert!(!ok, "{args:?} must fail");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    let (_, out, _) = cli(Some(db.url()), &["stats"]);
    assert!(
        out.lines().any(|l| l.starts_with("mailers") && l.split_whitespace().nth(3) == Some("1")),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_cancel_delete_by_filter_or_id_after_a_dry_run() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(2).expect("pool");
    let ids = insert(
        &pool,
        vec![
            NewJob::new("mail", "mailers", "{}"),
            NewJob::new("mail", "mailers", "{}"),
            NewJob::new("report", "reports", "{}"),
        ],
    )
    .await;
    fail(&pool, ids[0], "smtp down").await;
    fail(&pool, ids[1], "smtp down").await;
    let url = Some(db.url());

    let (ok, out, _) = cli(url, &["stats"]);
    assert!(ok);
    let header: Vec<&str> = out.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(
        header,
        [
            "queue",
            "pending",
            "available",
            "scheduled",
            "running",
            "retryable",
            "completed",
            "discarded",
            "cancelled"
        ]
    );
    let mailers: Vec<&str> =
        out.lines().find(|l| l.starts_with("mailers")).expect("mailers").split_whitespace().collect();
    assert_eq!(mailers, ["mailers", "0", "0", "0", "0", "0", "0", "2", "0"], "{out}");

    let (ok, out, _) = cli(url, &["retry", "--state", "discarded", "--queue", "mailers"]);
    assert!(ok);
    assert_eq!(
        out.trim(),
        "2 jobs match; pass --yes to retry them (running jobs are never retried or deleted, pending ones never retried)"
    );
    assert_eq!(state_of(&pool, ids[0]).await, Some(JobState::Discarded), "a dry run changes nothing");
    let (ok, out, _) = cli(url, &["retry", "--state", "discarded", "--queue", "mailers", "--yes"]);
    assert!(ok);
    assert_eq!(out.trim(), "2 jobs retried");
    assert_eq!(state_of(&pool, ids[0]).await, Some(JobState::Available));

    let (ok, out, _) = cli(url, &["cancel", "--id", &ids[2].to_string(), "--yes"]);
    assert!(ok);
    assert_eq!(out.trim(), "1 of 1 jobs cancelled");
    assert_eq!(state_of(&pool, ids[2]).await, Some(JobState::Cancelled));

    let (ok, out, _) =
        cli(url, &["delete", "--search", r#"{"missing": 1}"#, "--state", "cancelled", "--yes"]);
    assert!(ok);
    assert_eq!(out.trim(), "0 jobs deleted");
    let (ok, out, _) = cli(url, &["delete", "--all", "--yes"]);
    assert!(ok);
    assert_eq!(out.trim(), "3 jobs deleted");

    for (args, expected) in [
        (vec!["retry"], "error: say which jobs to retry: --id, a filter"),
        (
            vec!["retry", "--state", "broken"],
            "error: unknown state `broken`; use one of: pending, available, scheduled",
        ),
        (vec!["delete", "--search", "[1]"], "error: --search must be a JSON object"),
        (vec!["delete", "--all", "--queue", "q"], "cannot be used with"),
    ] {
        let (ok, _, err) = cli(url, &args);
        assert!(!ok, "{args:?} must fail");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// Enqueues two `mail` jobs on `mailers` through the command.
fn enqueue_two_mails(url: Option<&str>) {
    for args in [r#"{"user_id": 7}"#, r#"{"user_id": 8}"#] {
        let (ok, out, err) = cli(
            url,
            &["enqueue", "--allow-unknown-kind", "--kind", "mail", "--queue", "mailers", "--args", args],
        );
        assert!(ok && out.starts_with("enqueued job "), "{out}{err}");
    }
}

/// The `stats` line of `mailers`, split into its columns, and the whole output.
fn mailers_stats(url: Option<&str>) -> (Vec<String>, String) {
    let (ok, out, err) = cli(url, &["stats"]);
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.starts_with("mailers")).expect("mailers");
    (line.split_whitespace().map(str::to_owned).collect(), out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_works_on_a_sqlite_file() {
    let dir = std::env::temp_dir().join(format!("jobs-cli-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let url = format!("sqlite://{}", dir.join("jobs.db").display());
    let url = Some(url.as_str());
    let (ok, out, err) = cli(url, &["migrate"]);
    assert!(ok, "{err}");
    assert!(out.contains("applied 20261125000001"), "{out}");
    let (ok, out, _) = cli(url, &["migrate"]);
    assert!(ok);
    assert_eq!(out.trim(), "the jobs schema is up to date");
    enqueue_two_mails(url);
    let (mailers, out) = mailers_stats(url);
    assert_eq!(mailers, ["mailers", "0", "2", "0", "0", "0", "0", "0", "0"], "{out}");
    // Search by argument works on SQLite too (its JSON functions).
    let (ok, out, err) = cli(url, &["cancel", "--search", r#"{"user_id": 7}"#, "--yes"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "1 jobs cancelled");
    let (ok, out, _) = cli(url, &["delete", "--state", "cancelled", "--yes"]);
    assert!(ok);
    assert_eq!(out.trim(), "1 jobs deleted");
    let (ok, _, err) = cli(Some("sqlite://:memory:"), &["stats"]);
    assert!(!ok);
    assert!(err.contains("give SQLite a file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_works_on_mariadb() {
    let db = jobs_core::testing::MysqlTestDatabase::new().await.expect("a MariaDB test database");
    let url = Some(db.url());
    // The test database comes migrated: the command finds nothing to apply.
    let (ok, out, err) = cli(url, &["migrate"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "the jobs schema is up to date");
    enqueue_two_mails(url);
    let (ok, out, err) = cli(
        url,
        &[
            "enqueue",
            "--allow-unknown-kind",
            "--kind",
            "mail",
            "--queue",
            "mailers",
            "--args",
            "{}",
            "--in",
            "1h",
        ],
    );
    assert!(ok, "{out}{err}");
    let (mailers, out) = mailers_stats(url);
    assert_eq!(mailers, ["mailers", "0", "2", "1", "0", "0", "0", "0", "0"], "{out}");
    // Search by argument (JSON_CONTAINS, rechecked by the driver).
    let (ok, out, err) = cli(url, &["cancel", "--search", r#"{"user_id": 7}"#, "--yes"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "1 jobs cancelled");
    let (ok, out, _) = cli(url, &["retry", "--state", "cancelled", "--yes"]);
    assert!(ok);
    assert_eq!(out.trim(), "1 jobs retried");
    let (ok, out, _) = cli(url, &["delete", "--queue", "mailers", "--yes"]);
    assert!(ok);
    assert_eq!(out.trim(), "3 jobs deleted");
}

/// A kind no live node runs is refused as a likely typo, naming the live kinds; one a live
/// node runs goes, without `--queue`, on the queue its nodes serve, with the options the
/// node declares for it (this binary does not link the kind): attempts, timeout, priority,
/// tags, uniqueness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_checks_the_kind_against_live_nodes_and_finds_its_queue() {
    use jobs_core::IntoDriver;
    use jobs_core::driver::NodeHeartbeatParams;
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(2).expect("pool");
    let (ok, _, err) = cli(Some(db.url()), &["enqueue", "--kind", "app::send_welcome"]);
    assert!(!ok);
    assert!(err.contains("no live node runs kind `app::send_welcome` (no node is live)"), "{err}");
    assert!(err.contains("--allow-unknown-kind"), "says how to go on: {err}");

    let queues =
        serde_json::json!({"mailers": {"limit": 10, "running": 0}, "other": {"limit": 1, "running": 0}});
    let welcome = jobs_core::JobOptions::new()
        .queue("mailers")
        .priority(2)
        .max_attempts(5)
        .timeout(std::time::Duration::from_secs(45))
        .tag("welcome")
        .unique(jobs_core::UniqueOptions::new(jobs_core::UniqueBy::Fields(vec!["user_id".into()])));
    let beat = NodeHeartbeatParams {
        node: "mail-node",
        host: "h",
        pid: 1,
        queues: &queues,
        kinds: &["app::send_welcome"],
        kind_options: &serde_json::json!({ "app::send_welcome": welcome.to_published() }),
        now: None,
        lock: None,
        registering: true,
    };
    (&pool).into_driver().node_heartbeat(beat).await.expect("heartbeat");
    let (ok, _, err) = cli(Some(db.url()), &["enqueue", "--kind", "app::send_welcom"]);
    assert!(!ok);
    assert!(err.contains("live kinds: app::send_welcome"), "{err}");
    let (ok, out, err) =
        cli(Some(db.url()), &["enqueue", "--kind", "app::send_welcome", "--args", r#"{"user_id": 1}"#]);
    assert!(ok, "{err}");
    assert!(
        out.contains("on queue mailers"),
        "the kind's queue, not `other`, which its node serves too: {out}"
    );
    let id = enqueued_id(&out);
    let mut conn = pool.get().await.expect("conn");
    let row = jobs_core::get_job(&mut conn, id).await.expect("get").expect("row");
    assert_eq!(
        (row.priority, row.max_attempts, row.timeout_ms, row.tags),
        (2, 5, Some(45_000), vec!["welcome".to_owned()]),
        "the options the kind's node declares"
    );
    // The same user again: the kind's uniqueness key finds the first job.
    let (ok, out, err) = cli(
        Some(db.url()),
        &["enqueue", "--kind", "app::send_welcome", "--args", r#"{"user_id": 1}"#, "--priority", "0"],
    );
    assert!(ok, "{err}");
    assert!(out.contains(&format!("job {id} ")) && out.contains("already exists"), "{out}");
    // Another user, with overrides: the command line's values win, tags add up.
    let (ok, out, err) = cli(
        Some(db.url()),
        &[
            "enqueue",
            "--kind",
            "app::send_welcome",
            "--args",
            r#"{"user_id": 2}"#,
            "--priority",
            "0",
            "--max-attempts",
            "9",
            "--timeout",
            "5s",
            "--tag",
            "cli",
        ],
    );
    assert!(ok, "{err}");
    let id = enqueued_id(&out);
    let row = jobs_core::get_job(&mut conn, id).await.expect("get").expect("row");
    assert_eq!(
        (row.priority, row.max_attempts, row.timeout_ms, row.tags),
        (0, 9, Some(5_000), vec!["cli".to_owned(), "welcome".to_owned()])
    );
}
