//! The dashboard reading from a real streaming replica (a hot standby the test makes of a
//! private cluster with `pg_basebackup`), while jobs are written on the primary: pages show
//! what the replica has replayed, actions write to the primary, the overview shows the lag.

mod test_app;

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{App, test};
use diesel::QueryableByName;
use diesel::sql_types::{Bool, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_core::testing::cluster::TEST_SETTINGS;
use jobs_core::testing::{PgCluster, Server, TestDatabase, wait_for};
use jobs_core::{JobContext, JobState, job, postgres};
use jobs_dashboard::{Access, DashboardConfig};
use test_app::{get, insert, new_job, post, state_of, token};

#[derive(QueryableByName)]
struct Lsn {
    #[diesel(sql_type = Text)]
    lsn: String,
}

#[derive(QueryableByName)]
struct Flag {
    #[diesel(sql_type = Bool)]
    flag: bool,
}

async fn run(conn: &mut AsyncPgConnection, sql: &str) {
    diesel::sql_query(sql).execute(conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
}

#[actix_web::test]
async fn pages_read_from_a_replica_and_actions_write_to_the_primary() {
    let primary = PgCluster::start_private(TEST_SETTINGS).expect("primary cluster");
    let db = TestDatabase::on(Server::new(primary.admin_url())).await.expect("database on the primary");
    let replica = primary.start_replica().expect("a streaming replica");
    let pool = db.pool(4).expect("primary pool");
    let replica_pool = postgres::pool(&replica.url(db.name()), 4).expect("replica pool");
    let config = DashboardConfig::new(pool.clone())
        .read_from(replica_pool.clone())
        .authorize(|_: &actix_web::HttpRequest| Access::Full);
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/admin/jobs", config))).await;

    // A job written on the primary appears once the replica has replayed it.
    let first = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({"n": 1}))]).await[0];
    wait_for("the replica to show the first job", Duration::from_secs(30), || async {
        let (status, _, _) = get(&app, &format!("/admin/jobs/jobs/{first}")).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    let (_, overview, _) = get(&app, "/admin/jobs/").await;
    assert!(overview.contains(r#"<p id="replica">Read from a replica (PostgreSQL "#), "{overview}");

    // Replay paused: the replica receives the next job's WAL but does not apply it.
    let mut on_replica = postgres::connect(&replica.url(db.name())).await.expect("replica connection");
    run(&mut on_replica, "SELECT pg_wal_replay_pause()").await;
    let second = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({"n": 2}))]).await[0];
    let mut on_primary = db.connect().await.expect("primary connection");
    let written: Lsn = diesel::sql_query("SELECT pg_current_wal_insert_lsn()::text AS lsn")
        .get_result(&mut on_primary)
        .await
        .expect("primary LSN");
    wait_for("the replica to receive the second job's WAL", Duration::from_secs(30), || async {
        let mut on_replica = replica_pool.get().await.ok()?;
        let received: Flag = diesel::sql_query("SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn AS flag")
            .bind::<Text, _>(&written.lsn)
            .get_result(&mut on_replica)
            .await
            .ok()?;
        received.flag.then_some(())
    })
    .await;
    let (status, _, _) = get(&app, &format!("/admin/jobs/jobs/{second}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the page reads the replica, which has not replayed it");
    let (_, overview, _) = get(&app, "/admin/jobs/").await;
    assert!(overview.contains("behind the primary"), "{overview}");
    assert!(!overview.contains(r#"<span id="replica-lag">0 ms behind"#), "a paused replica lags: {overview}");

    // An action goes to the primary, which has the job (the replica could not take it).
    let csrf = token(&app).await;
    let (status, body, _) = post(&app, &format!("/admin/jobs/jobs/{second}/cancel"), Some(&csrf), &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(state_of(&pool, second).await, Some(JobState::Cancelled));

    // Replay resumed: the page catches up, with the cancellation.
    run(&mut on_replica, "SELECT pg_wal_replay_resume()").await;
    wait_for("the replica to show the cancelled job", Duration::from_secs(30), || async {
        let (status, body, _) = get(&app, &format!("/admin/jobs/jobs/{second}")).await;
        (status == StatusCode::OK && body.contains("cancelled")).then_some(())
    })
    .await;
}

/// A job for the worker below to serve.
#[job(queue = "default")]
async fn noop(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[actix_web::test]
async fn a_worker_refuses_to_start_on_a_replica_with_the_reason() {
    let primary = PgCluster::start_private(TEST_SETTINGS).expect("primary cluster");
    let db = TestDatabase::on(Server::new(primary.admin_url())).await.expect("database on the primary");
    let replica = primary.start_replica().expect("a streaming replica");
    let replica_pool = postgres::pool(&replica.url(db.name()), 4).expect("replica pool");
    let started =
        jobs_core::Worker::builder(replica_pool).queue("default", 1).build().expect("built").start().await;
    let Err(error) = started else { panic!("a worker on a read-only replica must not start") };
    let error = error.to_string();
    assert!(error.contains("read-only (a replica, or in recovery): workers need the primary"), "{error}");
    let primary_pool = db.pool(4).expect("primary pool");
    let handle =
        jobs_core::Worker::builder(primary_pool).queue("default", 1).build().expect("built").start().await;
    handle.expect("the same worker starts on the primary").shutdown().await.expect("shutdown");
}
