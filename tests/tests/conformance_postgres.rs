//! The conformance suite on Postgres: every case runs (Postgres has every capability).

use async_trait::async_trait;
use diesel::PgConnection;
use diesel_async::AsyncPgConnection;
use jobs_core::driver::Capabilities;
use jobs_core::testing::TestDatabase;
use jobs_core::{IntoDriver, PgDriver};
use jobs_tests::conformance::app_transaction::{connecting, connecting_sync};
use jobs_tests::conformance::{Backend, TestDb};

struct Postgres;

#[async_trait]
impl Backend for Postgres {
    const CAPABILITIES: Capabilities = Capabilities::ALL;

    async fn database(connections: usize) -> TestDb {
        let db = TestDatabase::new().await.expect("a test database");
        let driver = db.pool(connections).expect("pool").into_driver();
        let url = db.url().to_owned();
        let another = {
            let url = url.clone();
            move |n| PgDriver::new(jobs_core::postgres::pool(&url, n).expect("pool")).into_driver()
        };
        TestDb::new(
            driver,
            another,
            connecting::<AsyncPgConnection>(&url),
            connecting_sync::<PgConnection>(url),
        )
        .keep_alive(db)
    }
}

jobs_conformance::suite! {
    backend: Postgres;
    lacks: [];
}

/// The suite ran on the server it was meant for: `JOBS_EXPECT_POSTGRES_MAJOR` (set by
/// `scripts/test` for its run on a second major version) names the major version, else any
/// supported one will do. Without this check, a run meant for another version could attach
/// to a shared cluster of the first one and pass without testing anything new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_runs_on_the_postgres_major_version_it_was_meant_for() {
    use diesel::sql_types::Integer;
    use diesel_async::RunQueryDsl;

    #[derive(diesel::QueryableByName)]
    struct Version {
        #[diesel(sql_type = Integer)]
        major: i32,
    }
    let db = TestDatabase::new().await.expect("a test database");
    let mut conn = db.connect().await.expect("connect");
    let version: Version =
        diesel::sql_query("SELECT current_setting('server_version_num')::int / 10000 AS major")
            .get_result(&mut conn)
            .await
            .expect("server version");
    match std::env::var("JOBS_EXPECT_POSTGRES_MAJOR").ok().filter(|v| !v.is_empty()) {
        Some(expected) => assert_eq!(version.major.to_string(), expected, "the server's major version"),
        None => {
            assert!(
                version.major >= jobs_core::driver::OLDEST_POSTGRES_MAJOR as i32,
                "Postgres {} is not supported",
                version.major
            )
        }
    }
}
