//! The cases, by area. Each takes a fresh [`TestDb`](super::TestDb); [`CASES`](crate::CASES)
//! lists them with what each needs.

mod app_values;
mod archive;
mod batches;
mod claims;
mod control;
mod cron;
mod lifecycle;
mod limits;
mod losses;
mod nodes;
mod outcomes;
mod partition_limits;
mod prefetch;
mod pruner;
mod read_model;
mod rescue;
mod transactions;
mod unique;
mod workflow_reads;
mod workflow_retries;
mod workflow_runs;
mod workflows;

pub use app_values::*;
pub use archive::*;
pub use batches::*;
pub use claims::*;
pub use control::*;
pub use cron::*;
pub use lifecycle::*;
pub use limits::*;
pub use losses::*;
pub use nodes::*;
pub use outcomes::*;
pub use partition_limits::*;
pub use prefetch::*;
pub use pruner::*;
pub use read_model::*;
pub use rescue::*;
pub use transactions::*;
pub use unique::*;
pub use workflow_reads::*;
pub use workflow_retries::*;
pub use workflow_runs::*;
pub use workflows::*;
