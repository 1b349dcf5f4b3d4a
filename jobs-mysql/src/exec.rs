//! How the driver runs an operation's statements: in a transaction on a pooled connection,
//! delivering the notifications it added once it commits ([`in_transaction`]), or on a
//! connection lent from the pool ([`on_connection`]). Either gives the connection back to
//! the pool, or drops it when the outcome says it is broken (`pool::Lent`).

/// Runs `$body` (async, on `$tx`, returning the result and the notifications it added) in
/// a transaction on a pooled connection; delivers the notifications once it commits.
macro_rules! in_transaction {
    ($driver:expr, |$tx:ident| $body:expr) => {{
        let mut conn = $driver.conn().await?;
        let outcome = conn.transaction::<_, jobs_driver::DriverError, _>(async |$tx| $body).await;
        conn.give_back(&outcome);
        let (result, told) = outcome?;
        $driver.deliver(&told);
        Ok::<_, jobs_driver::DriverError>(result)
    }};
}
pub(crate) use in_transaction;

/// Runs `$body` (async, on `$conn`, a connection lent from the pool: see `pool::Lent`).
macro_rules! on_connection {
    ($driver:expr, |$conn:ident| $body:expr) => {{
        let mut lent = $driver.conn().await?;
        let outcome = {
            let $conn = &mut *lent;
            $body
        };
        lent.give_back(&outcome);
        outcome
    }};
}
pub(crate) use on_connection;
