//! Every job kind the binary knows, collected through `inventory`.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::job::Job;
use crate::job_context::JobContext;
use crate::options::JobOptions;
use crate::outcome::{Failure, IntoOutcome, RunOutcome};

/// Runs one attempt of a job from its stored arguments.
pub type RunFn = fn(JobContext, &RawValue) -> BoxFuture<'static, RunOutcome>;

/// What to do about cron slots that passed while no node was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedPolicy {
    /// Forget them; run at the next slot (the default).
    #[default]
    Skip,
    /// Enqueue the most recent missed slot once, then carry on.
    RunLatest,
}

impl MissedPolicy {
    /// The name stored in `job_schedules.missed_policy`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MissedPolicy::Skip => "skip",
            MissedPolicy::RunLatest => "run_latest",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "skip" => Some(MissedPolicy::Skip),
            "run_latest" => Some(MissedPolicy::RunLatest),
            _ => None,
        }
    }
}

/// A cron schedule declared on the job itself (`#[job(cron = "...")]`).
#[derive(Debug, Clone, Copy)]
pub struct CronAttribute {
    /// The cron expression (validated at compile time).
    pub expression: &'static str,
    /// An IANA time zone name, `UTC` by default.
    pub timezone: &'static str,
    /// The missed-slot policy.
    pub missed: MissedPolicy,
    /// Encodes the arguments each slot's job gets (`Default::default()`).
    pub args: fn() -> std::result::Result<String, serde_json::Error>,
}

/// Everything the runtime needs about one job kind, without its types.
#[derive(Debug, Clone, Copy)]
pub struct JobDescriptor {
    /// The kind name.
    pub kind: &'static str,
    /// The Rust type that defines it (for error messages).
    pub type_name: fn() -> &'static str,
    /// The kind's default options.
    pub options: fn() -> JobOptions,
    /// Decodes the arguments and runs the handler.
    pub run: RunFn,
    /// Checks that JSON arguments decode as the kind's argument type (the dashboard's
    /// enqueue form uses it when the kind is registered in its process); the error says
    /// where and why they do not.
    pub check_args: fn(&str) -> std::result::Result<(), String>,
    /// A schedule declared on the attribute.
    pub cron: Option<CronAttribute>,
    /// The application's values the job needs ([`Job::needs`]).
    pub needs: fn() -> Vec<crate::data::Need>,
}

inventory::collect!(JobDescriptor);

fn run_erased<J: Job>(ctx: JobContext, args: &RawValue) -> BoxFuture<'static, RunOutcome> {
    if let Some(need) = ctx.app_data().missing(&J::needs()) {
        // Another node may have it: the attempt fails and the job retries.
        let failure = Failure {
            message: crate::error::missing_data_message(
                J::KIND,
                need.type_name(),
                &ctx.app_data().type_names(),
            ),
            error_type: "missing_data".into(),
            backtrace: None,
        };
        return Box::pin(std::future::ready(RunOutcome::Failed(failure)));
    }
    match serde_json::from_str::<J::Args>(args.get()) {
        Err(e) => {
            let failure = Failure {
                message: format!(
                    "the stored arguments no longer decode as `{}`: {e}",
                    std::any::type_name::<J::Args>()
                ),
                error_type: "invalid_args".into(),
                backtrace: None,
            };
            Box::pin(std::future::ready(RunOutcome::Discarded(failure)))
        }
        Ok(args) => Box::pin(async move {
            match J::run(ctx, args).await {
                Ok(output) => output.into_outcome(),
                Err(error) => RunOutcome::Failed(Failure {
                    message: format!("{error:#}"),
                    error_type: std::any::type_name::<J::Error>().to_owned(),
                    backtrace: None,
                }),
            }
        }),
    }
}

fn check_args<J: Job>(args: &str) -> std::result::Result<(), String> {
    serde_json::from_str::<J::Args>(args)
        .map(drop)
        .map_err(|e| format!("the arguments do not decode as `{}`: {e}", std::any::type_name::<J::Args>()))
}

impl JobDescriptor {
    /// The descriptor of `J`.
    pub const fn of<J: Job>() -> JobDescriptor {
        JobDescriptor {
            kind: J::KIND,
            type_name: std::any::type_name::<J>,
            options: J::options,
            run: run_erased::<J>,
            check_args: check_args::<J>,
            cron: None,
            needs: J::needs,
        }
    }

    /// The same descriptor with a schedule declared on the attribute.
    pub const fn with_cron(mut self, cron: CronAttribute) -> JobDescriptor {
        self.cron = Some(cron);
        self
    }
}

/// The job kinds a worker can run, by kind name.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    by_kind: Arc<HashMap<&'static str, JobDescriptor>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Every job registered in this binary with `#[job]` or [`register_job!`](crate::register_job).
    ///
    /// Fails with [`Error::DuplicateKind`], naming both definitions, when two jobs share a
    /// kind.
    pub fn from_inventory() -> Result<Registry> {
        let mut registry = Registry::new();
        for descriptor in inventory::iter::<JobDescriptor> {
            registry.add(*descriptor)?;
        }
        Ok(registry)
    }

    /// Adds one descriptor.
    pub fn add(&mut self, descriptor: JobDescriptor) -> Result<()> {
        let map = Arc::make_mut(&mut self.by_kind);
        if let Some(existing) = map.get(descriptor.kind) {
            if (existing.type_name)() == (descriptor.type_name)() {
                return Ok(());
            }
            return Err(Error::DuplicateKind {
                kind: descriptor.kind.to_owned(),
                first: (existing.type_name)().to_owned(),
                second: (descriptor.type_name)().to_owned(),
            });
        }
        map.insert(descriptor.kind, descriptor);
        Ok(())
    }

    /// Adds `J`.
    pub fn with<J: Job>(mut self) -> Result<Registry> {
        self.add(JobDescriptor::of::<J>())?;
        Ok(self)
    }

    /// The descriptor for a kind.
    pub fn get(&self, kind: &str) -> Option<&JobDescriptor> {
        self.by_kind.get(kind)
    }

    /// Every registered kind, sorted.
    pub fn kinds(&self) -> Vec<&'static str> {
        let mut kinds: Vec<_> = self.by_kind.keys().copied().collect();
        kinds.sort_unstable();
        kinds
    }

    /// Every descriptor.
    pub fn descriptors(&self) -> impl Iterator<Item = &JobDescriptor> {
        self.by_kind.values()
    }

    /// Each kind's options as a node publishes them with its heartbeat
    /// (`{"kind": …}`, [`JobOptions::to_published`](crate::JobOptions::to_published)).
    pub fn published_options(&self) -> serde_json::Value {
        self.descriptors().map(|d| (d.kind.to_owned(), (d.options)().to_published())).collect()
    }

    /// The registered kinds by the queue they name (their default queue), each sorted.
    pub fn kinds_by_queue(&self) -> std::collections::BTreeMap<String, Vec<&'static str>> {
        let mut by_queue: std::collections::BTreeMap<String, Vec<&'static str>> = Default::default();
        for descriptor in self.descriptors() {
            by_queue.entry((descriptor.options)().queue.into_owned()).or_default().push(descriptor.kind);
        }
        for kinds in by_queue.values_mut() {
            kinds.sort_unstable();
        }
        by_queue
    }

    /// Whether no job is registered.
    pub fn is_empty(&self) -> bool {
        self.by_kind.is_empty()
    }
}
