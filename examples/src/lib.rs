//! The shop: its job definitions, tables and business operations, shared by the web app
//! (`shop`, which can run its workers in-process) and the separate worker binary
//! (`shop-worker`). Jobs live in a library so both binaries register the same ones.

use std::sync::Arc;
use std::time::Duration;

use diesel::prelude::*;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use jobs_core::driver::Driver;
use jobs_core::{JobContext, Outcome, job};
use serde::{Deserialize, Serialize};

pub mod report;

/// Arguments of [`send_welcome`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Welcome {
    /// The new customer.
    pub user_id: i64,
    /// Where to write.
    pub email: String,
}

/// What the mailer answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Receipt {
    /// The mail provider's message id.
    pub message_id: String,
}

/// The mail provider refused the message.
#[derive(Debug, thiserror::Error)]
#[error("the mail provider refused {email}: {reason}")]
pub struct MailError {
    email: String,
    reason: &'static str,
}

/// Sends the welcome mail after sign-up.
#[job(kind = "shop.send_welcome", queue = "mailers", max_attempts = 5, priority = 2, timeout = "30s",
      backoff = exponential(base = "2s", max = "5m"))]
pub async fn send_welcome(ctx: JobContext, args: Welcome) -> Result<Receipt, MailError> {
    if args.email.ends_with("@bounce.example") {
        return Err(MailError { email: args.email, reason: "mailbox does not exist" });
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(Receipt { message_id: format!("msg-{}-{}", args.user_id, ctx.attempt()) })
}

/// Arguments of [`charge_order`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Charge {
    /// The order.
    pub order_id: i64,
    /// The amount.
    pub cents: i64,
}

/// Charges an order; one per order at a time.
#[job(kind = "shop.charge_order", queue = "billing", max_attempts = 3, unique(fields(order_id)))]
pub async fn charge_order(_ctx: JobContext, args: Charge) -> Result<Outcome<String>, std::io::Error> {
    if args.cents == 0 {
        return Ok(Outcome::cancel("nothing to charge"));
    }
    if args.cents < 0 {
        return Ok(Outcome::discard("refunds go through the refund job"));
    }
    if args.order_id % 7 == 0 {
        panic!("payment gateway client crashed on order {}", args.order_id);
    }
    Ok(Outcome::Complete(format!("charged {} cents", args.cents)))
}

/// Builds the nightly sales report; waits (without using up attempts) while the
/// warehouse sync that started with it is still running.
#[job(kind = "shop.sales_report", queue = "reports", timeout = "5m")]
pub async fn sales_report(ctx: JobContext) -> Result<Outcome<u64>, std::io::Error> {
    let age = chrono::Utc::now() - ctx.created_at();
    if ctx.meta_value("warehouse_busy").is_some() && age < chrono::Duration::seconds(5) {
        return Ok(Outcome::snooze(Duration::from_secs(5)));
    }
    Ok(Outcome::Complete(42))
}

/// Removes abandoned carts, every minute.
#[job(kind = "shop.expire_carts", queue = "maintenance", cron = "* * * * *")]
pub async fn expire_carts(_ctx: JobContext) -> Result<u64, std::io::Error> {
    Ok(0)
}

/// Arguments of [`fulfil_order`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fulfil {
    /// The order to ship.
    pub order_id: i64,
}

/// The warehouse API is flaky.
#[derive(Debug, thiserror::Error)]
#[error("the warehouse API timed out (attempt {attempt})")]
pub struct WarehouseTimeout {
    attempt: i32,
}

/// Ships an order. The warehouse API times out on the first two attempts, so each order
/// fails twice (retrying after 1 s, then 2 s) and succeeds on the third.
#[job(kind = "shop.fulfil_order", queue = "billing", max_attempts = 5,
      backoff = exponential(base = "1s", max = "1m"))]
pub async fn fulfil_order(ctx: JobContext, args: Fulfil) -> Result<String, WarehouseTimeout> {
    if ctx.attempt() < 3 {
        return Err(WarehouseTimeout { attempt: ctx.attempt() });
    }
    Ok(format!("order {} shipped", args.order_id))
}

/// Arguments of [`mail_shipped`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shipped {
    /// The order that left the warehouse.
    pub order_id: i64,
}

/// Tells the customer their order is on its way: the second step of an order's workflow
/// ([`store::place_order`]), due only once [`fulfil_order`] completed, whose answer it
/// reads. Were the fulfilment given up on, this mail would be cancelled, never sent.
#[job(kind = "shop.mail_shipped", queue = "mailers", max_attempts = 5)]
pub async fn mail_shipped(ctx: JobContext, args: Shipped) -> Result<String, jobs_core::Error> {
    let shipped: String = ctx.dependency_result::<fulfil_order>().await?;
    Ok(format!("mailed the customer of order {}: {shipped}", args.order_id))
}

/// Sends yesterday's figures to the team, every night at 03:00 UTC.
#[job(kind = "shop.nightly_digest", queue = "reports", cron = "0 3 * * *")]
pub async fn nightly_digest(ctx: JobContext) -> Result<String, jobs_core::Error> {
    let orders = Db::of_job(&ctx)?.count_orders().await?;
    Ok(format!("{orders} orders so far"))
}

/// The shop's database: Postgres, SQLite or MariaDB/MySQL, as its URL says. The shop's
/// own tables and its jobs live in it side by side, so that an order and its jobs commit
/// together.
#[derive(Clone)]
pub enum Db {
    /// A Postgres pool.
    Postgres(jobs_core::postgres::Pool),
    /// A SQLite pool.
    Sqlite(jobs_core::sqlite::Pool),
    /// A MariaDB or MySQL pool.
    Mysql(jobs_core::mysql::Pool),
}

/// Runs `$body` with `$conn`, a connection of the shop's database, whichever it is: the
/// same diesel code compiles for each backend.
macro_rules! with_connection {
    ($db:expr, |$conn:ident| $body:expr) => {
        match $db {
            Db::Postgres(pool) => {
                let mut $conn = pool.get().await?;
                $body
            }
            Db::Sqlite(pool) => {
                let mut $conn = pool.get().await?;
                $body
            }
            Db::Mysql(pool) => {
                let mut $conn = pool.get().await?;
                $body
            }
        }
    };
}

impl Db {
    /// Opens the database `url` names (`postgres://…`, `sqlite://…` or `mysql://…`) with a pool of
    /// `connections`, migrates the jobs schema, creates the shop's tables, and returns it
    /// with the driver the worker and the dashboard run on.
    pub async fn open(url: &str, connections: usize) -> Result<(Db, Arc<dyn Driver>), jobs_core::Error> {
        let driver = jobs_core::driver_for_url(url, connections)?;
        driver.migrate().await?;
        let db = Db::of_driver(&*driver)?;
        with_connection!(&db, |conn| conn.batch_execute(schema::create_sql(&db)).await?);
        Ok((db, driver))
    }

    /// The database a driver runs on.
    pub fn of_driver(driver: &dyn Driver) -> Result<Db, jobs_core::Error> {
        if let Some(pool) = driver.pool().downcast_ref::<jobs_core::postgres::Pool>() {
            return Ok(Db::Postgres(pool.clone()));
        }
        if let Some(pool) = driver.pool().downcast_ref::<jobs_core::sqlite::Pool>() {
            return Ok(Db::Sqlite(pool.clone()));
        }
        if let Some(pool) = driver.pool().downcast_ref::<jobs_core::mysql::Pool>() {
            return Ok(Db::Mysql(pool.clone()));
        }
        Err(jobs_core::Error::Pool(format!("the shop has no tables on the {} driver", driver.name())))
    }

    /// The database of the worker running a job.
    pub fn of_job(ctx: &JobContext) -> Result<Db, jobs_core::Error> {
        let driver =
            ctx.driver().ok_or_else(|| jobs_core::Error::Pool("the job runs without a driver".into()))?;
        Db::of_driver(&**driver)
    }

    /// The SQL function giving the id this session inserted last (MySQL has no
    /// `INSERT … RETURNING`; each backend has such a function).
    fn last_insert_id(&self) -> &'static str {
        match self {
            Db::Postgres(_) => "lastval()",
            Db::Sqlite(_) => "last_insert_rowid()",
            Db::Mysql(_) => "LAST_INSERT_ID()",
        }
    }

    /// How many orders there are.
    pub async fn count_orders(&self) -> Result<i64, jobs_core::Error> {
        with_connection!(self, |conn| Ok(schema::orders::table.count().get_result(&mut conn).await?))
    }
}

/// The shop's own tables.
pub mod schema {
    diesel::table! {
        /// Customers.
        users (id) {
            /// Id.
            id -> BigInt,
            /// Where the welcome mail goes.
            email -> Text,
        }
    }

    diesel::table! {
        /// Orders.
        orders (id) {
            /// Id.
            id -> BigInt,
            /// The customer.
            user_id -> BigInt,
            /// The amount.
            cents -> BigInt,
        }
    }

    /// Creates the tables on Postgres (the shop's own migration, kept inline for the
    /// example).
    pub const CREATE_POSTGRES: &str = "\
        CREATE TABLE IF NOT EXISTS users (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE);
        CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, user_id bigint NOT NULL REFERENCES users, cents bigint NOT NULL);";

    /// Creates the tables on SQLite.
    pub const CREATE_SQLITE: &str = "\
        CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE);
        CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users, cents INTEGER NOT NULL);";

    /// Creates the tables on MariaDB or MySQL.
    pub const CREATE_MYSQL: &str = "\
        CREATE TABLE IF NOT EXISTS users (id BIGINT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(255) NOT NULL UNIQUE);
        CREATE TABLE IF NOT EXISTS orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, user_id BIGINT NOT NULL,
                                           cents BIGINT NOT NULL, FOREIGN KEY (user_id) REFERENCES users (id));";

    /// The statements creating the tables on `db`'s backend.
    pub fn create_sql(db: &super::Db) -> &'static str {
        match db {
            super::Db::Postgres(_) => CREATE_POSTGRES,
            super::Db::Sqlite(_) => CREATE_SQLITE,
            super::Db::Mysql(_) => CREATE_MYSQL,
        }
    }
}

/// The shop's business operations: each writes its rows and enqueues its jobs in one
/// transaction, so a job exists exactly when its rows do.
pub mod store {
    use diesel::dsl::sql;
    use diesel::prelude::*;
    use diesel::sql_types::BigInt;
    use diesel_async::{AsyncConnection, RunQueryDsl};

    use super::schema::{orders, users};
    use jobs_core::Workflow;

    use super::{Db, Fulfil, Shipped, Welcome, fulfil_order, mail_shipped, send_welcome};

    /// Signs up `email`: the user row and the welcome mail commit together. Returns the
    /// user's id.
    pub async fn sign_up(db: &Db, email: &str) -> Result<i64, jobs_core::Error> {
        let last_id = sql::<BigInt>(db.last_insert_id());
        with_connection!(db, |conn| {
            conn.transaction(async |tx| {
                diesel::insert_into(users::table).values(users::email.eq(email)).execute(tx).await?;
                let user_id: i64 = diesel::select(last_id).get_result(tx).await?;
                send_welcome::enqueue(&mut *tx, Welcome { user_id, email: email.to_owned() }).await?;
                Ok(user_id)
            })
            .await
        })
    }

    /// Places an order and queues its fulfilment and then the customer's mail (a workflow:
    /// the mail waits for the fulfilment), in one transaction. Returns the order id.
    pub async fn place_order(db: &Db, user_id: i64, cents: i64) -> Result<i64, jobs_core::Error> {
        let last_id = sql::<BigInt>(db.last_insert_id());
        with_connection!(db, |conn| {
            conn.transaction(async |tx| {
                diesel::insert_into(orders::table)
                    .values((orders::user_id.eq(user_id), orders::cents.eq(cents)))
                    .execute(tx)
                    .await?;
                let order_id: i64 = diesel::select(last_id).get_result(tx).await?;
                // Ship it, then mail the customer: one workflow, in the order's transaction.
                let mut order = Workflow::new(format!("order {order_id}"));
                let ship = order.add(fulfil_order::build(Fulfil { order_id }));
                order.add_after(mail_shipped::build(Shipped { order_id }), [&ship]);
                order.enqueue(&mut *tx).await?;
                Ok(order_id)
            })
            .await
        })
    }
}

/// The shop's worker: its queues and their concurrency, and its failed attempts reported
/// (to the output here; to an error tracker in an app). The in-process worker of `shop`
/// and the separate `shop-worker` binary both start from this.
pub fn worker(driver: Arc<dyn Driver>) -> jobs_core::WorkerBuilder {
    jobs_core::Worker::builder(driver)
        .queue("mailers", 10)
        .queue("billing", 5)
        .queue("reports", 1)
        .queue("maintenance", 1)
        .middleware(report::ReportFailures(report::PrintReports))
}
