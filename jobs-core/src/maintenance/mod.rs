//! The leader's background services: the [`LeaderElector`], the [`Scheduler`], the
//! [`Rescuer`], the [`Archiver`], the [`Pruner`], the [`Settler`] and the [`CronEnqueuer`].
//!
//! Every service has the same shape: a `*Config` with defaults and a `validate()` (called
//! by `WorkerBuilder::build`), a `run_once()` that does one pass (tests call it directly),
//! and a `run()` loop that calls it every interval — only while this node holds the
//! leader lease, for all but the elector. Each reaches the database only through the
//! driver in its [`ServiceContext`].

mod archiver;
mod cron_enqueuer;
mod leader;
mod pruner;
mod rescuer;
mod scheduler;
mod service_context;
mod settler;

pub use archiver::{Archiver, ArchiverConfig};
pub use cron_enqueuer::{CronConfig, CronEnqueuer, Fired};
pub use leader::{LeaderConfig, LeaderElector};
pub use pruner::{Pruner, PrunerConfig};
pub use rescuer::{Rescuer, RescuerConfig};
pub use scheduler::{Scheduler, SchedulerConfig};
pub use service_context::ServiceContext;
pub use settler::{Settler, SettlerConfig};
