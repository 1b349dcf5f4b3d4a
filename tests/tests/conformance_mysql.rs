//! The conformance suite on MariaDB, a database per case on one throwaway server (or the
//! server `MYSQL_URL` names): every case runs but the one that needs planner estimates,
//! which is reported as skipped.

use async_trait::async_trait;
use jobs_core::IntoDriver;
use jobs_core::driver::Capabilities;
use jobs_core::mysql::MysqlDriver;
use jobs_core::testing::MysqlTestDatabase;
use jobs_tests::conformance::{Backend, TestDb};

struct Mysql;

#[async_trait]
impl Backend for Mysql {
    const CAPABILITIES: Capabilities = jobs_core::mysql::CAPABILITIES;

    async fn database(connections: usize) -> TestDb {
        let db = MysqlTestDatabase::new().await.expect("a test database");
        let driver = db.driver(connections).expect("driver").into_driver();
        let url = db.url().to_owned();
        TestDb {
            driver,
            another: Box::new({
                let url = url.clone();
                move |n| MysqlDriver::open(&url, n).expect("driver").into_driver()
            }),
            begin: jobs_tests::app_connections::mysql(url.clone()),
            begin_sync: jobs_tests::app_connections::mysql_sync(url),
            keep_alive: Box::new(db),
        }
    }
}

jobs_conformance::suite! {
    backend: Mysql;
    lacks: [CountEstimates];
}
