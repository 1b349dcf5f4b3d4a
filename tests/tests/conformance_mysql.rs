//! The conformance suite on MariaDB, a database per case on one throwaway server (or the
//! server `MYSQL_URL` names): every case runs but the one that needs planner estimates,
//! which is reported as skipped.

use async_trait::async_trait;
use diesel::MysqlConnection;
use diesel_async::AsyncMysqlConnection;
use jobs_core::IntoDriver;
use jobs_core::driver::Capabilities;
use jobs_core::mysql::MysqlDriver;
use jobs_core::testing::MysqlTestDatabase;
use jobs_tests::conformance::app_transaction::{connecting, connecting_sync};
use jobs_tests::conformance::{Backend, TestDb};

struct Mysql;

#[async_trait]
impl Backend for Mysql {
    const CAPABILITIES: Capabilities = jobs_core::mysql::CAPABILITIES;

    async fn database(connections: usize) -> TestDb {
        let db = MysqlTestDatabase::new().await.expect("a test database");
        let driver = db.driver(connections).expect("driver").into_driver();
        let url = db.url().to_owned();
        let another = {
            let url = url.clone();
            move |n| MysqlDriver::open(&url, n).expect("driver").into_driver()
        };
        let (begin, begin_sync) =
            (connecting::<AsyncMysqlConnection>(&url), connecting_sync::<MysqlConnection>(url));
        TestDb::new(driver, another, begin, begin_sync).keep_alive(db)
    }
}

jobs_conformance::suite! {
    backend: Mysql;
    lacks: [CountEstimates];
}
