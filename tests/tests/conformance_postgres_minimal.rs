//! The conformance suite on Postgres with its optional capabilities switched off
//! (`PgDriver::without`): no LISTEN/NOTIFY (as behind a pooler in transaction mode), no
//! planner estimates, no JSON containment. The engine falls back (workers poll, the
//! heartbeat carries cancellations, counts past their cap say "more than"), and the cases
//! that need what is off are reported as skipped, naming it.

use async_trait::async_trait;
use diesel::PgConnection;
use diesel_async::AsyncPgConnection;
use jobs_core::driver::{Capabilities, Capability};
use jobs_core::testing::TestDatabase;
use jobs_core::{IntoDriver, PgDriver};
use jobs_tests::conformance::app_transaction::{connecting, connecting_sync};
use jobs_tests::conformance::{Backend, TestDb};

struct MinimalPostgres;

fn minimal(pool: jobs_core::postgres::Pool) -> PgDriver {
    PgDriver::new(pool)
        .without(Capability::ListenNotify)
        .without(Capability::CountEstimates)
        .without(Capability::JsonContainment)
        .without(Capability::LivenessLocks)
}

#[async_trait]
impl Backend for MinimalPostgres {
    const CAPABILITIES: Capabilities = Capabilities::ALL
        .without(Capability::ListenNotify)
        .without(Capability::CountEstimates)
        .without(Capability::JsonContainment)
        .without(Capability::LivenessLocks);

    /// The full run is `conformance_postgres`'s; this one is about the capabilities it lacks.
    const MODEL_STEPS: u64 = 2_000;

    async fn database(connections: usize) -> TestDb {
        let db = TestDatabase::new().await.expect("a test database");
        let driver = minimal(db.pool(connections).expect("pool")).into_driver();
        let url = db.url().to_owned();
        let another = {
            let url = url.clone();
            move |n| minimal(jobs_core::postgres::pool(&url, n).expect("pool")).into_driver()
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
    backend: MinimalPostgres;
    lacks: [LivenessLocks, ListenNotify, JsonContainment, CountEstimates];
}
