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
//! Files: `builder` (settings; `builder/checks` holds what `build()` checks), `configured` (a built worker and its
//! start-up), `handle` (a running worker and its shutdown), `config` (queues), `runtime` (the state the tasks share), `producer`,
//! `buffer` (claimed jobs waiting for a slot), `prefetch` (how many to buffer), `executor`, `running` (a running job's handle), `completions` (the channel),
//! `completer`, `listener`, `heartbeat`, `liveness` (keeping the node's liveness lock),
//! `drain` (running due jobs inline),
//! `panic_capture`.

mod buffer;
mod builder;
mod completer;
mod completions;
mod config;
mod configured;
mod drain;
mod executor;
mod handle;
mod heartbeat;
mod limit;
mod listener;
mod liveness;
mod panic_capture;
mod prefetch;
mod producer;
mod running;
mod runtime;

pub use builder::WorkerBuilder;
pub use config::{QueueConfig, UnknownKindPolicy};
pub use configured::Worker;
pub use drain::Drained;
pub use handle::{ShutdownReport, WorkerHandle};
