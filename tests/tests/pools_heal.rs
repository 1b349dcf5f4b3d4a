//! Every pool the project hands out heals after its database server restarts: Postgres
//! (`jobs_core::postgres::pool`, and `pooler::pool` through a PgBouncer in front of the
//! restarted server) and MariaDB/MySQL (`jobs_core::mysql::pool`). Each pool is warmed to
//! its size, the server restarted, and every connection it then hands out must work again
//! within the deadline, then keep working. (SQLite has no server: its pool's connections
//! are files opened in this process.)
//!
//! Before the MySQL pool checked its connections at checkout, a restart left every pooled
//! connection closed, and the pool handed them out for ever: "Connection to the server is
//! closed" on every statement.

use std::future::Future;
use std::time::{Duration, Instant};

use diesel_async::RunQueryDsl;
use jobs_core::mysql::testing::{LocalServer, Server as MysqlServer};
use jobs_core::testing::cluster::TEST_SETTINGS;
use jobs_core::testing::{MysqlTestDatabase, PgBouncer, PgCluster, Server, TestDatabase};

/// Connections each pool holds (and each round checks out at once).
const WIDTH: usize = 4;
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `query` on `WIDTH` connections at once; whether all succeeded (the first error).
async fn round<F, Fut>(query: &F) -> Result<(), String>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let all = futures::future::join_all((0..WIDTH).map(|_| query())).await;
    all.into_iter().collect()
}

/// Warms the pool, restarts the server, then waits for a full round to succeed and checks
/// three more do. Returns how long healing took.
async fn heals<F, Fut>(what: &str, query: F, restart: impl FnOnce()) -> Duration
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    round(&query).await.unwrap_or_else(|e| panic!("{what}: before the restart: {e}"));
    restart();
    let restarted = Instant::now();
    let mut last = String::new();
    loop {
        match round(&query).await {
            Ok(()) => break,
            Err(e) => last = e,
        }
        assert!(
            restarted.elapsed() < DEADLINE,
            "{what}: still failing {DEADLINE:?} after the restart: {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let healed = restarted.elapsed();
    for n in 0..3 {
        round(&query).await.unwrap_or_else(|e| panic!("{what}: round {n} after healing failed: {e}"));
    }
    println!("{what}: healed {healed:?} after the restart (last error: {last})");
    healed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_pools_heal_after_the_server_restarts() {
    let cluster = tokio::task::spawn_blocking(|| PgCluster::start_private(TEST_SETTINGS))
        .await
        .expect("start task")
        .expect("private cluster");
    let db = TestDatabase::on(Server::new(cluster.admin_url())).await.expect("test database");
    let pool = jobs_core::postgres::pool(db.url(), WIDTH).expect("pool");
    let query = || {
        let pool = pool.clone();
        async move {
            let mut conn = pool.get().await.map_err(|e| e.to_string())?;
            diesel::sql_query("SELECT 1").execute(&mut conn).await.map(|_| ()).map_err(|e| e.to_string())
        }
    };
    heals("postgres pool", query, || cluster.restart().expect("restart")).await;

    let bouncer = PgBouncer::start_in_front_of(db.url(), WIDTH).expect("pgbouncer");
    let pooled = jobs_core::postgres::pooler::pool(&bouncer.url(db.name()), WIDTH).expect("pool");
    let query = || {
        let pool = pooled.clone();
        async move {
            use diesel_async::{AnsiTransactionManager, TransactionManager};
            let mut conn = pool.get().await.map_err(|e| e.to_string())?;
            // Through PgBouncer in transaction mode: inside a transaction, as the driver does.
            AnsiTransactionManager::begin_transaction(&mut *conn).await.map_err(|e| e.to_string())?;
            diesel::sql_query("SELECT 1").execute(&mut conn).await.map_err(|e| e.to_string())?;
            AnsiTransactionManager::commit_transaction(&mut *conn).await.map_err(|e| e.to_string())
        }
    };
    heals("postgres pool through PgBouncer", query, || cluster.restart().expect("restart")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_pools_heal_after_the_server_restarts() {
    let server = tokio::task::spawn_blocking(LocalServer::start_private)
        .await
        .expect("start task")
        .expect("private server");
    let db = MysqlTestDatabase::on(&MysqlServer::new(server.url("mysql"))).await.expect("test database");
    let pool = jobs_core::mysql::pool(db.url(), WIDTH).expect("pool");
    let query = || {
        let pool = pool.clone();
        async move {
            let mut conn = pool.get().await.map_err(|e| e.to_string())?;
            diesel::sql_query("SELECT 1").execute(&mut conn).await.map(|_| ()).map_err(|e| e.to_string())
        }
    };
    heals("mysql pool", query, || server.restart().expect("restart")).await;
}
