//! The framework's migrations beside the application's own, on Postgres, MariaDB/MySQL and
//! SQLite: the application runs, reverts and redoes its diesel migrations (in diesel's
//! `__diesel_schema_migrations`) with the framework's installed (in
//! `jobs_schema_migrations`), whichever ran first, and a database migrated before the
//! framework had its own table has the framework's versions moved out of diesel's on its
//! next migrate. (With both in diesel's table, the framework's later-dated versions came
//! last, and the application's `revert` looked for them among its own files and failed.)

use diesel::backend::Backend;
use diesel::migration::MigrationSource;
use diesel_async::{AsyncConnection, AsyncMigrationHarness, SimpleAsyncConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use jobs_core::driver_for_url;

/// The application's own migrations: `app_users`, then `app_orders`.
const APP: EmbeddedMigrations = embed_migrations!("app_migrations");

/// The application's versions, oldest first.
const APP_VERSIONS: [&str; 2] = ["20260101000001", "20260102000001"];

fn versions(applied: Vec<diesel::migration::MigrationVersion<'_>>) -> Vec<String> {
    let mut versions: Vec<String> = applied.iter().map(ToString::to_string).collect();
    versions.sort();
    versions
}

/// The framework's schema on `url`, migrated through its driver: what it applied.
async fn jobs_migrate(url: &str) -> Vec<String> {
    driver_for_url(url, 1).expect("driver").migrate().await.expect("the framework's migrations")
}

/// Which migrations a database gets first.
#[derive(Debug, Clone, Copy)]
enum First {
    /// The framework's.
    Framework,
    /// The application's.
    App,
    /// The framework's, recorded in diesel's table as before `jobs_schema_migrations` (a
    /// database an earlier release migrated).
    FrameworkTheOldWay,
}

const ORDERS: [First; 3] = [First::Framework, First::App, First::FrameworkTheOldWay];

/// The application's migrations through `app` (diesel's own harness, diesel's table) and
/// the framework's through its driver on `url`, `first` first: each side runs, reverts and
/// redoes its own.
async fn side_by_side<DB, H>(url: &str, app: &mut H, jobs: impl MigrationSource<DB>, first: First)
where
    DB: Backend,
    H: MigrationHarness<DB>,
{
    let ours = jobs.migrations().expect("the framework's migrations").len();
    match first {
        First::Framework => assert_eq!(jobs_migrate(url).await.len(), ours, "a fresh database"),
        First::App => {
            assert_eq!(versions(app.run_pending_migrations(APP).expect("the app's")), APP_VERSIONS);
            assert_eq!(jobs_migrate(url).await.len(), ours, "all of the framework's, beside the app's");
        }
        First::FrameworkTheOldWay => {
            let applied = app.run_pending_migrations(jobs).expect("the framework's, the old way");
            assert_eq!(applied.len(), ours);
            assert_eq!(jobs_migrate(url).await, Vec::<String>::new(), "adopted: nothing to apply again");
        }
    }
    if !matches!(first, First::App) {
        assert_eq!(versions(app.run_pending_migrations(APP).expect("the app's")), APP_VERSIONS);
    }
    assert_eq!(
        versions(app.applied_migrations().expect("applied")),
        APP_VERSIONS,
        "diesel's table holds the application's versions only"
    );
    assert_eq!(jobs_migrate(url).await, Vec::<String>::new(), "the framework's schema is current");

    // `diesel migration revert`, then `redo`.
    let reverted = app.revert_last_migration(APP).expect("the app reverts its own last migration");
    assert_eq!(reverted.to_string(), APP_VERSIONS[1]);
    let again = app.run_pending_migrations(APP).expect("and runs it again");
    assert_eq!(versions(again), &APP_VERSIONS[1..]);
    let reverted = app.revert_last_migration(APP).expect("redo: revert");
    assert_eq!(reverted.to_string(), APP_VERSIONS[1]);
    app.run_pending_migrations(APP).expect("redo: run");

    // Nothing left for either to do.
    assert!(app.pending_migrations(APP).expect("pending").is_empty());
    assert_eq!(jobs_migrate(url).await, Vec::<String>::new());
    // And the framework's schema works: a job goes in and is read back.
    let driver = driver_for_url(url, 1).expect("driver");
    let job = jobs_core::NewJob::new("app.welcome", "default", "{}");
    let inserted = jobs_core::enqueue_many(&driver, [job]).await.expect("enqueue");
    assert_eq!(inserted.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_the_apps_migrations_on_postgres() {
    for first in ORDERS {
        let db = jobs_core::testing::TestDatabase::empty().await.expect("an empty database");
        let mut app = AsyncMigrationHarness::new(db.connect().await.expect("connect"));
        side_by_side(db.url(), &mut app, jobs_core::postgres::migrate::MIGRATIONS, first).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_the_apps_migrations_on_mysql_or_mariadb() {
    let server = jobs_core::mysql::testing::Server::from_env().await.expect("server");
    let mut admin = diesel_async::AsyncMysqlConnection::establish(&server.url_for("mysql"))
        .await
        .expect("admin connection");
    for first in ORDERS {
        let name =
            format!("jobs_app_migrations_{}_{:06x}", std::process::id(), rand::random::<u32>() & 0xff_ffff);
        admin.batch_execute(&format!("CREATE DATABASE `{name}`")).await.expect("create database");
        let url = server.url_for(&name);
        let conn = diesel_async::AsyncMysqlConnection::establish(&url).await.expect("connect");
        let mut app = AsyncMigrationHarness::new(conn);
        side_by_side(&url, &mut app, jobs_core::mysql::migrate::MIGRATIONS, first).await;
        drop(app);
        admin.batch_execute(&format!("DROP DATABASE `{name}`")).await.expect("drop database");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_the_apps_migrations_on_sqlite() {
    use diesel::Connection;
    for first in ORDERS {
        let path = std::env::temp_dir().join(format!(
            "jobs-app-migrations-{}-{:08x}.db",
            std::process::id(),
            rand::random::<u32>()
        ));
        let url = format!("sqlite://{}", path.display());
        let mut app = diesel::SqliteConnection::establish(&path.display().to_string()).expect("open");
        // As an application's connection beside a worker should: wait for the write lock.
        diesel::connection::SimpleConnection::batch_execute(&mut app, "PRAGMA busy_timeout = 5000")
            .expect("busy timeout");
        side_by_side(&url, &mut app, jobs_core::sqlite::migrate::MIGRATIONS, first).await;
        drop(app);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
