//! The shop: its job definitions, tables and business operations, shared by the web app
//! (`shop`, which can run its workers in-process) and the separate worker binary
//! (`shop-worker`). Jobs live in a library so both binaries register the same ones.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use jobs_core::{JobContext, Outcome, job};
use serde::{Deserialize, Serialize};

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

/// Sends yesterday's figures to the team, every night at 03:00 UTC.
#[job(kind = "shop.nightly_digest", queue = "reports", cron = "0 3 * * *")]
pub async fn nightly_digest(ctx: JobContext) -> Result<String, jobs_core::Error> {
    let mut conn = ctx.conn().await?;
    let orders: i64 =
        schema::orders::table.count().get_result(&mut conn).await.map_err(jobs_core::Error::Database)?;
    Ok(format!("{orders} orders so far"))
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

    /// Creates the tables (the shop's own migration, kept inline for the example).
    pub const CREATE: &str = "\
        CREATE TABLE IF NOT EXISTS users (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE);
        CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, user_id bigint NOT NULL REFERENCES users, cents bigint NOT NULL);";
}

/// The shop's business operations: each writes its rows and enqueues its jobs in one
/// transaction, so a job exists exactly when its rows do.
pub mod store {
    use diesel::prelude::*;
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

    use super::schema::{orders, users};
    use super::{Fulfil, Welcome, fulfil_order, send_welcome};

    /// Signs up `email`: the user row and the welcome mail commit together. Returns the
    /// user's id.
    pub async fn sign_up(conn: &mut AsyncPgConnection, email: &str) -> Result<i64, jobs_core::Error> {
        conn.transaction(async |tx| {
            let user_id: i64 = diesel::insert_into(users::table)
                .values(users::email.eq(email))
                .returning(users::id)
                .get_result(tx)
                .await?;
            send_welcome::enqueue(&mut *tx, Welcome { user_id, email: email.to_owned() }).await?;
            Ok(user_id)
        })
        .await
    }

    /// Places an order and queues its fulfilment, in one transaction. Returns the order id.
    pub async fn place_order(
        conn: &mut AsyncPgConnection,
        user_id: i64,
        cents: i64,
    ) -> Result<i64, jobs_core::Error> {
        conn.transaction(async |tx| {
            let order_id: i64 = diesel::insert_into(orders::table)
                .values((orders::user_id.eq(user_id), orders::cents.eq(cents)))
                .returning(orders::id)
                .get_result(tx)
                .await?;
            fulfil_order::enqueue(&mut *tx, Fulfil { order_id }).await?;
            Ok(order_id)
        })
        .await
    }
}

/// The shop's worker: its queues and their concurrency. The in-process worker of `shop`
/// and the separate `shop-worker` binary both start from this.
pub fn worker(pool: jobs_core::Pool) -> jobs_core::WorkerBuilder {
    jobs_core::Worker::builder(pool)
        .queue("mailers", 10)
        .queue("billing", 5)
        .queue("reports", 1)
        .queue("maintenance", 1)
}
