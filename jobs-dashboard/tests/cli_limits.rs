//! `jobs-dashboard limits`, run as a real process against a real Postgres: a queue's
//! cluster-wide limits shown, and changed one at a time.

mod test_app;

use jobs_core::testing::TestDatabase;
use test_app::cli::cli;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_shown_and_changed_one_at_a_time() {
    let db = TestDatabase::new().await.expect("db");
    let url = Some(db.url());
    let (ok, out, err) = cli(url, &["limits", "exports"]);
    assert!(ok, "{err}");
    assert!(out.contains("per-key limit: none") && out.contains("rate: none"), "{out}");

    let (ok, out, err) = cli(url, &["limits", "exports", "--per-key", "2", "--rate", "100/minute"]);
    assert!(ok, "{err}");
    assert!(out.contains("per-key limit: 2") && out.contains("rate: 100 per 60 s"), "{out}");
    assert!(out.contains("global limit: none"), "{out}");

    let (ok, out, err) = cli(url, &["limits", "exports", "--per-key-rate", "10/hour"]);
    assert!(ok, "{err}");
    assert!(out.contains("rate per key: 10 per 3600 s") && out.contains("per-key limit: 2"), "{out}");

    let (ok, out, err) = cli(url, &["limits", "exports", "--global", "5"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("global limit: 5")
            && out.contains("per-key limit: 2")
            && out.contains("rate per key: 10"),
        "the others are kept: {out}"
    );
    let (ok, _, err) = cli(url, &["limits", "exports", "--per-key-rate", "ten/hour"]);
    assert!(!ok);
    assert!(err.contains("--per-key-rate takes N/PERIOD"), "{err}");

    let (ok, _, err) = cli(url, &["limits", "exports", "--per-key", "0"]);
    assert!(!ok);
    assert!(err.contains("per-key limit is 1 to"), "{err}");
    let (ok, _, err) = cli(url, &["limits", "exports", "--rate", "fast"]);
    assert!(!ok);
    assert!(err.contains("--rate takes N/PERIOD"), "{err}");

    let (ok, out, err) =
        cli(url, &["limits", "exports", "--per-key", "none", "--rate", "none", "--per-key-rate", "none"]);
    assert!(ok, "{err}");
    assert!(out.contains("per-key limit: none") && out.contains("global limit: 5"), "{out}");
    assert!(out.contains("rate per key: none"), "{out}");
}
