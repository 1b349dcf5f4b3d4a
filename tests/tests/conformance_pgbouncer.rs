//! The conformance suite through a real PgBouncer 1.18 in transaction mode (started per
//! case in front of the case's database, with fewer server connections than the clients
//! have, so that they share them as in production), both ways the guide documents:
//! - `polling`: every statement through PgBouncer (`PgDriver::through_pooler`); LISTEN
//!   cannot pass it, so workers poll and the notification case is skipped;
//! - `listening`: the same, with LISTEN on a direct connection
//!   (`PgDriver::listen_directly`): every case runs.
//!
//! PgBouncer 1.18 keeps no prepared statements and no session state across transactions:
//! a statement that leaked out of its transaction fails here ("prepared statement ... does
//! not exist" / "already exists"), as `tests/pgbouncer.rs` shows for a driver that does not
//! know it is behind the pooler.

use std::sync::Arc;

use jobs_core::driver::Driver;
use jobs_core::testing::{PgBouncer, TestDatabase};
use jobs_core::{IntoDriver, PgDriver};
use jobs_tests::conformance::TestDb;

/// Server connections PgBouncer lends per database: fewer than a case's clients.
const SERVER_CONNECTIONS: usize = 8;

/// A case's database, a PgBouncer in front of it, and drivers through it; `direct` gives
/// them LISTEN on a direct connection.
async fn through_pgbouncer(connections: usize, direct: bool) -> TestDb {
    let db = TestDatabase::new().await.expect("a test database");
    let bouncer = PgBouncer::start_in_front_of(db.url(), SERVER_CONNECTIONS).expect("pgbouncer");
    let pooled_url = bouncer.url(db.name());
    let direct_url = db.url().to_owned();
    let driver_for = move |n: usize| -> Arc<dyn Driver> {
        let pool = jobs_core::postgres::pooler::pool(&pooled_url, n).expect("pool");
        let driver = PgDriver::through_pooler(pool);
        if direct { driver.listen_directly(direct_url.clone()) } else { driver }.into_driver()
    };
    // The application's transactions go through PgBouncer too.
    let begin = jobs_tests::app_connections::postgres_through_pooler(bouncer.url(db.name()));
    let begin_sync = jobs_tests::app_connections::postgres_sync_through_pooler(bouncer.url(db.name()));
    // PgBouncer goes first, closing its server connections before the database is dropped.
    TestDb::new(driver_for(connections), driver_for, begin, begin_sync).keep_alive((bouncer, db))
}

mod polling {
    use async_trait::async_trait;
    use jobs_core::driver::{Capabilities, Capability};
    use jobs_tests::conformance::{Backend, TestDb};

    struct PgBouncerPolling;

    #[async_trait]
    impl Backend for PgBouncerPolling {
        const CAPABILITIES: Capabilities =
            Capabilities::ALL.without(Capability::ListenNotify).without(Capability::LivenessLocks);

        /// The full run is `conformance_postgres`'s; this one is about the pooler.
        const MODEL_STEPS: u64 = 2_000;

        async fn database(connections: usize) -> TestDb {
            super::through_pgbouncer(connections, false).await
        }
    }

    jobs_conformance::suite! {
        backend: PgBouncerPolling;
        lacks: [LivenessLocks, ListenNotify];
    }
}

mod listening {
    use async_trait::async_trait;
    use jobs_core::driver::Capabilities;
    use jobs_tests::conformance::{Backend, TestDb};

    struct PgBouncerListeningDirectly;

    #[async_trait]
    impl Backend for PgBouncerListeningDirectly {
        const CAPABILITIES: Capabilities = Capabilities::ALL;

        /// The full run is `conformance_postgres`'s; this one is about the pooler.
        const MODEL_STEPS: u64 = 2_000;

        async fn database(connections: usize) -> TestDb {
            super::through_pgbouncer(connections, true).await
        }
    }

    jobs_conformance::suite! {
        backend: PgBouncerListeningDirectly;
        lacks: [];
    }
}
