//! The model-based test (`jobs_tests::model`) on each backend: random interleavings of
//! every operation from several simulated nodes against the real driver, checked after
//! every step. `JOBS_MODEL_STEPS=1000000 cargo test --release -p jobs-tests --test model
//! -- --nocapture` is the long run `docs/reliability.md` records; `JOBS_MODEL_SEED`
//! replays a printed seed.

use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use jobs_core::IntoDriver;
use jobs_core::testing::{MysqlTestDatabase, SqliteTestDatabase, TestDatabase};
use jobs_tests::conformance::app_transaction::connecting;
use jobs_tests::model::{self, Target};

/// Steps per backend in a test run (CI).
const CI_STEPS: u64 = 10_000;

const WIPE_COMMON: [&str; 6] = [
    "DELETE FROM jobs",
    "DELETE FROM job_nodes",
    "DELETE FROM job_queues",
    "DELETE FROM job_leaders",
    "DELETE FROM job_dependencies",
    "DELETE FROM job_workflows",
];

#[test]
fn the_model_holds_on_postgres() {
    model::run("postgres", CI_STEPS, async {
        let db = TestDatabase::new().await.expect("database");
        let mut wipe = WIPE_COMMON.to_vec();
        wipe.push("DELETE FROM jobs_archive");
        Target {
            driver: db.pool(4).expect("pool").into_driver(),
            begin: connecting::<AsyncPgConnection>(db.url()),
            wipe,
            keep_alive: Box::new(db),
        }
    });
}

#[test]
fn the_model_holds_on_sqlite() {
    model::run("sqlite", CI_STEPS, async {
        let db = SqliteTestDatabase::new().await.expect("database");
        Target {
            driver: db.driver(4).expect("driver").into_driver(),
            begin: jobs_tests::app_connections::sqlite(db.url()),
            wipe: WIPE_COMMON.to_vec(),
            keep_alive: Box::new(db),
        }
    });
}

#[test]
fn the_model_holds_on_mysql_or_mariadb() {
    model::run("mysql", CI_STEPS, async {
        let db = MysqlTestDatabase::new().await.expect("database");
        Target {
            driver: db.driver(4).expect("driver").into_driver(),
            begin: connecting::<AsyncMysqlConnection>(db.url()),
            wipe: WIPE_COMMON.to_vec(),
            keep_alive: Box::new(db),
        }
    });
}
