//! The conformance suite on SQLite, a database file per case: every case runs but those
//! that need what SQLite lacks (SKIP LOCKED, planner estimates), which are reported as
//! skipped.

use async_trait::async_trait;
use jobs_core::IntoDriver;
use jobs_core::driver::Capabilities;
use jobs_core::sqlite::SqliteDriver;
use jobs_core::testing::SqliteTestDatabase;
use jobs_tests::conformance::{Backend, TestDb};

struct Sqlite;

#[async_trait]
impl Backend for Sqlite {
    const CAPABILITIES: Capabilities = jobs_core::sqlite::CAPABILITIES;

    async fn database(connections: usize) -> TestDb {
        let db = SqliteTestDatabase::new().await.expect("a test database");
        let driver = db.driver(connections).expect("driver").into_driver();
        let url = db.url();
        let another = {
            let url = url.clone();
            move |n| SqliteDriver::open(&url, n).expect("driver").into_driver()
        };
        let (begin, begin_sync) =
            (jobs_tests::app_connections::sqlite(url.clone()), jobs_tests::app_connections::sqlite_sync(url));
        TestDb::new(driver, another, begin, begin_sync).keep_alive(db)
    }
}

jobs_conformance::suite! {
    backend: Sqlite;
    lacks: [SkipLocked, CountEstimates];
}
