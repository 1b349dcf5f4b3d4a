//! The worker: claims jobs from its queues, runs them, writes their outcomes back, and
//! (on the leader) runs the maintenance services.
//!
//! ```text
//!  listener ──wake──▶ producer (one per queue) ──job_claim──▶ buffer ──▶ executor per busy slot
//!                                                                                  │ outcome
//!  heartbeat ─▶ node_heartbeat      completer ◀──────────channel────────────────────┘
//!                                     └─ job_complete_many per batch (fenced)
//!  leader elector ─▶ scheduler, rescuer, pruner, cron (leader only)
//! ```
//!
//! Files: `builder` (settings; `builder/checks` holds what `build()` checks), `startup` (a built worker and its
//! start-up), `handle` (a running worker and its shutdown), `config` (queues), `shared` (the state the tasks share), `producer`,
//! `concurrency` (a queue's slots on this node, changeable while it runs), `buffer` (claimed jobs waiting for a slot), `prefetch` (how many to buffer), `executor` (running a job), `run_end` (what ended a run, and the row's next state), `running_jobs` (a running job's handle), `completion_channel` (the channel),
//! `completer`, `listener`, `heartbeat`, `liveness` (keeping the node's liveness lock),
//! `drain` (running due jobs inline),
//! `panic_capture`.

mod buffer;
mod builder;
mod completer;
mod completion_channel;
mod concurrency;
mod config;
mod drain;
mod executor;
mod handle;
mod heartbeat;
mod listener;
mod liveness;
pub(crate) mod panic_capture;
mod prefetch;
mod producer;
mod run_end;
mod running_jobs;
mod shared;
mod startup;

pub use builder::WorkerBuilder;
pub use config::{QueueConfig, UnknownKindPolicy};
pub use drain::Drained;
pub use handle::{ShutdownReport, WorkerHandle};
pub use startup::Worker;
