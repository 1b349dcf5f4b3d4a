//! Handing the application's values to the jobs ([`WorkerBuilder::data`]).

use std::sync::Arc;

use super::WorkerBuilder;
use crate::data::AppData;

impl WorkerBuilder {
    /// Hands `value` to the jobs, by its type: a `#[job]` function takes it as a
    /// `Data<T>` parameter (`mailer: Data<Mailer>`), other code as
    /// [`JobContext::data`](crate::JobContext::data). One value per type (a second replaces
    /// the first); wrap clients that are not `Sync` in a `Mutex`. `build()` refuses a
    /// worker that serves a queue whose jobs need a value it was not given
    /// ([`Error::MissingData`](crate::Error::MissingData)).
    ///
    /// ```no_run
    /// # async fn example(pool: jobs_core::postgres::Pool) -> jobs_core::Result<()> {
    /// struct Mailer { from: String }
    /// let worker = jobs_core::Worker::builder(pool)
    ///     .queue("mailers", 10)
    ///     .data(Mailer { from: "hello@example.com".into() })
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn data<T: Send + Sync + 'static>(self, value: T) -> Self {
        self.data_arc(Arc::new(value))
    }

    /// Hands an already shared value to the jobs (see [`data`](Self::data)): the app's
    /// own `Arc<Mailer>` stays shared with its web handlers.
    pub fn data_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Self {
        self.data = std::mem::take(&mut self.data).with_arc(value);
        self
    }

    /// Every value at once (replacing those given before): what the testing helpers
    /// take, `AppData::new().with(mailer).with(config)`.
    pub fn app_data(mut self, data: AppData) -> Self {
        self.data = data;
        self
    }

    /// Skips `build()`'s check of the values the served queues' jobs need: each run checks
    /// its own (the testing helpers, which serve one queue for one job at a time).
    #[cfg(feature = "testing")]
    pub(crate) fn check_data_per_run(mut self) -> Self {
        self.check_data = false;
        self
    }
}
