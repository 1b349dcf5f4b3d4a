//! The shop's job definitions, shared by the web app and the separate worker binary.

use std::time::Duration;

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
