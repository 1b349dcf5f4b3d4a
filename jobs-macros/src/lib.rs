//! The `#[job]` attribute for [`jobs-core`](https://docs.rs/jobs-core). Use it through
//! `jobs_core::job`; the attribute's options are documented there.
//!
//! ```
//! use jobs_core::{job, JobContext};
//!
//! #[job(queue = "mail", max_attempts = 5, timeout = "30s")]
//! async fn send_welcome(_ctx: JobContext, user_id: i64) -> Result<(), std::io::Error> {
//!     println!("welcome, user {user_id}");
//!     Ok(())
//! }
//!
//! assert!(send_welcome::KIND.ends_with("::send_welcome"));
//! ```

mod expand;
mod parse;
mod signature;

use proc_macro::TokenStream;

/// Turns `async fn name(ctx: JobContext[, args: T][, x: Data<X>]...) -> Result<O, E>` into
/// a job kind.
///
/// The function becomes a unit struct of the same name implementing `jobs_core::Job`,
/// registered through `inventory` so that `Registry::from_inventory()` (and so every
/// worker) knows it. `T` is the job's arguments (any serde type, `()` when omitted); `O`
/// is stored as the job's result (or is an `Outcome` to snooze, cancel or discard); `E`'s
/// text is recorded with the failed attempt (`E: Display + Send`: a `Box<dyn Error>` is not
/// `Send`; use `anyhow::Error`, your own error type, or `Box<dyn Error + Send + Sync>`).
/// Each `Data<X>` parameter is a value of the application's (a mail client, an HTTP client,
/// its config, its own pool) given to the worker with `.data(value)`; a worker serving the
/// job's queue without it refuses to start. Generated items:
///
/// - `name::enqueue(target, args)`: insert through an async connection of any backend
///   (`&mut AsyncPgConnection`, `&mut AsyncMysqlConnection`, SQLite's
///   `&mut SyncConnectionWrapper<SqliteConnection>`; inside the caller's transaction when
///   it is in one), a Postgres `&Pool`, or a driver (`&PgDriver`, `&SqliteDriver`,
///   `&MysqlDriver`, `&Arc<dyn Driver>`);
/// - `name::enqueue_sync(&mut conn, args)`: the same on a sync diesel connection
///   (`PgConnection`, `MysqlConnection`, `SqliteConnection`);
/// - `name::build(args)`: an `EnqueueRequest` for per-call queue, delay, priority, meta;
/// - `name::call(ctx, args, ..)`: the handler itself, for tests;
/// - `name::KIND`: the kind name.
///
/// Options (all optional, checked at compile time):
///
/// | option | meaning | default |
/// |---|---|---|
/// | `kind = "billing.charge"` | the stored kind name; set it so that moving or renaming the function does not orphan queued rows | the function's path, `concat!(module_path!(), "::name")` |
/// | `queue = "mail"` | the queue | `"default"` |
/// | `priority = 1` | `i16`, lower runs first | `0` |
/// | `max_attempts = 5` | attempts before the job is discarded | `20` |
/// | `timeout = "30s"` | per-attempt limit (humantime: `"500ms"`, `"1h 30m"`) | none |
/// | `backoff = exponential(base = "1s", max = "10m")` | also `linear(step = .., max = ..)`, `constant("30s")`, `polynomial`, `custom(path::to::fn)` | `polynomial`: attempt⁴ + 15 s |
/// | `unique(args \| kind \| fields(a, b) \| key = "..", period = "1h", states(..), by_queue)` | at most one job per key; a duplicate enqueue returns the existing job's id | none; `unique` alone means by args among pending states |
/// | `tags = ["a", "b"]` | tags on every job of the kind | none |
/// | `cron = "*/5 * * * *"` | also enqueue on this schedule (5 fields, or 6 with seconds first, or `@hourly`), with `T::default()` as arguments | none |
/// | `cron_tz = "Europe/Paris"` | the schedule's IANA time zone | `"UTC"` |
/// | `cron_missed = "run_latest"` | after downtime, run the latest missed slot once, or `"skip"` them | `"skip"` |
/// | `crate = path` | where `jobs_core` is, when re-exported | `::jobs_core` |
///
/// ```
/// use jobs_core::{job, JobContext, Outcome};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct Charge {
///     pub order_id: i64,
///     pub cents: i64,
/// }
///
/// #[job(kind = "billing.charge", queue = "billing", max_attempts = 5, timeout = "30s",
///       backoff = exponential(base = "2s", max = "5m"), unique(fields(order_id)))]
/// pub async fn charge(ctx: JobContext, args: Charge) -> Result<Outcome<String>, std::io::Error> {
///     if args.cents == 0 {
///         return Ok(Outcome::cancel("nothing to charge"));
///     }
///     Ok(Outcome::Complete(format!("charged order {} on attempt {}", args.order_id, ctx.attempt())))
/// }
///
/// assert_eq!(charge::KIND, "billing.charge");
/// ```
///
/// With values of the application's:
///
/// ```
/// use jobs_core::{job, Data, JobContext};
///
/// pub struct Mailer { pub from: String }
///
/// #[job(queue = "mail")]
/// async fn send_welcome(_ctx: JobContext, email: String, mailer: Data<Mailer>) -> Result<String, std::io::Error> {
///     Ok(format!("{} -> {email}", mailer.from))
/// }
///
/// // Worker::builder(pool).queue("mail", 10).data(Mailer { from: "hi@example.com".into() }).build()?
/// assert_eq!(<send_welcome as jobs_core::Job>::needs().len(), 1);
/// ```
#[proc_macro_attribute]
pub fn job(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item_tokens = proc_macro2::TokenStream::from(item.clone());
    let result = parse::JobAttr::parse(attr.into()).and_then(|attr| {
        let item: syn::ItemFn = syn::parse2(item_tokens)?;
        let job = signature::JobFn::parse(item)?;
        Ok(expand::expand(attr, job))
    });
    match result {
        Ok(tokens) => tokens.into(),
        // Keep the function so that its own code still resolves; only the error is new.
        Err(e) => {
            let mut tokens = e.to_compile_error();
            tokens.extend(proc_macro2::TokenStream::from(item));
            tokens.into()
        }
    }
}
