//! The demo: migrates, enqueues a few jobs and shows them.
//!
//! Run with `cargo run -p jobs-examples --bin shop`. Without `DATABASE_URL` it starts a
//! throwaway Postgres and removes it on exit.

use jobs_core::db::jobs::NewJob;
use jobs_core::testing::PgCluster;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (_cluster, url) = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => (None, url),
        _ => {
            let cluster = PgCluster::start_private(jobs_core::testing::cluster::TEST_SETTINGS)?;
            let url = cluster.admin_url();
            println!(
                "DATABASE_URL is unset: started a throwaway Postgres at {}",
                cluster.socket_dir().display()
            );
            (Some(cluster), url)
        }
    };
    let applied = jobs_core::migrate(jobs_core::db::connect(&url).await?).await?;
    println!("migrations applied: {applied:?}");
    let mut conn = jobs_core::db::connect(&url).await?;
    let job = NewJob {
        kind: "demo".into(),
        queue: "default".into(),
        args: "{\"hello\":\"world\"}".into(),
        meta: "{}".into(),
        tags: vec![],
        priority: 0,
        max_attempts: 3,
        timeout_ms: None,
        run_at: None,
        delay_ms: None,
        unique: None,
    };
    let inserted = jobs_core::db::jobs::insert_many(&mut conn, &[job], None).await?;
    println!("enqueued job {}", inserted[0].id);
    Ok(())
}
