//! The sync example runs with one command and does what its header says.

use tokio::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_enqueue_commits_or_rolls_back_with_the_transaction() {
    let output = Command::new(env!("CARGO_BIN_EXE_sync-enqueue"))
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("run");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains(
            "rolled back (invalid option `email`: rejected by a later check): no user row and no job"
        ),
        "{text}"
    );
    assert!(text.contains("jobs waiting: 1"), "{text}");
    assert!(text.contains("ran job 1 (shop.send_welcome): completed"), "{text}");
}
