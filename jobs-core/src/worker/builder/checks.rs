//! The checks `WorkerBuilder::build` runs before wiring anything: every setting against
//! the rules of `settings`, and every served queue against the registry.

use tokio::sync::Semaphore;

use super::WorkerBuilder;
use crate::data::AppData;
use crate::enqueue::validate_queue;
use crate::error::{Error, Result};
use crate::registry::Registry;
use crate::settings;
use crate::worker::config::UnknownKindPolicy;

impl WorkerBuilder {
    /// Every setting against the rules of [`settings`].
    pub(super) fn check(&self) -> Result<()> {
        if self.queues.is_empty() {
            return Err(Error::InvalidOption {
                option: "queues",
                reason: "a worker needs at least one queue".into(),
            });
        }
        for q in &self.queues {
            validate_queue(&q.name)?;
            if q.concurrency == 0 || q.concurrency > Semaphore::MAX_PERMITS {
                return Err(Error::InvalidOption {
                    option: "concurrency",
                    reason: format!(
                        "queue `{}`: concurrency must be between 1 and {}",
                        q.name,
                        Semaphore::MAX_PERMITS
                    ),
                });
            }
            let limits = &q.limits;
            if let Some(n) = limits.global_limit {
                jobs_driver::validation::validate_global_limit(n)?;
            }
            if let Some(n) = limits.per_key_limit {
                jobs_driver::validation::validate_per_key_limit(n)?;
            }
            for rate in [limits.rate, limits.per_key_rate].into_iter().flatten() {
                jobs_driver::validation::validate_rate_limit(
                    i64::from(rate.allowed),
                    i64::from(rate.period_secs),
                )?;
            }
            // Zero is allowed: no buffer.
            if let Some(n) = q.prefetch.filter(|&n| n > 0) {
                settings::count("prefetch", i64::try_from(n).unwrap_or(i64::MAX), settings::MAX_BATCH)?;
            }
        }
        settings::period("poll_interval", self.poll_interval)?;
        settings::period("heartbeat_interval", self.heartbeat_interval)?;
        settings::at_most_max_period("shutdown_timeout", self.shutdown_timeout)?;
        settings::at_most_max_period("fetch_cooldown", self.fetch_cooldown)?;
        settings::at_most_max_period("orphan_grace", self.orphan_grace)?;
        settings::at_most_max_period("prefetch_window", self.prefetch_window)?;
        settings::period("prefetch_max_wait", self.prefetch_max_wait)?;
        settings::count("max_fetch", i64::try_from(self.max_fetch).unwrap_or(i64::MAX), settings::MAX_BATCH)?;
        settings::count("claims_in_flight", i64::try_from(self.claims_in_flight).unwrap_or(i64::MAX), 64)?;
        match self.unknown_kinds {
            UnknownKindPolicy::Postpone(delay) => settings::period("unknown_kinds.postpone", delay)?,
            UnknownKindPolicy::HandBack { retry_in, give_up_after } => {
                settings::period("unknown_kinds.retry_in", retry_in)?;
                settings::period("unknown_kinds.give_up_after", give_up_after)?;
            }
            _ => {}
        }
        if self.maintenance {
            self.leader.validate()?;
            self.scheduler.validate()?;
            self.rescuer.validate()?;
            self.archiver.validate()?;
            self.settler.validate()?;
            self.pruner.validate()?;
            self.cron.validate()?;
            // A node is rescued when its heartbeat is older than this: shorter than the
            // heartbeat itself, every live node's jobs would be taken from it.
            settings::longer_than(
                "rescuer.node_stale_after",
                self.rescuer.node_stale_after,
                "heartbeat_interval",
                self.heartbeat_interval,
            )?;
            // A live node whose lock connection broke takes the lock again at its next
            // heartbeat: until then its lock is free, and only its heartbeat vouches for it.
            settings::longer_than(
                "rescuer.lock_lost_grace",
                self.rescuer.lock_lost_grace,
                "heartbeat_interval",
                self.heartbeat_interval,
            )?;
            settings::longer_than(
                "leader.lock_lost_grace",
                self.leader.lock_lost_grace,
                "heartbeat_interval",
                self.heartbeat_interval,
            )?;
            // A buffered job's row says it was claimed when it was buffered; the rescuer
            // must not take it for an overrun timeout while it waits for a slot.
            settings::longer_than(
                "rescuer.timeout_grace",
                self.rescuer.timeout_grace,
                "prefetch_max_wait",
                self.prefetch_max_wait,
            )?;
            // Likewise a live leader would lose its lease between two of its heartbeats.
            settings::longer_than(
                "leader.holder_stale_after",
                self.leader.holder_stale_after,
                "heartbeat_interval",
                self.heartbeat_interval,
            )?;
        }
        Ok(())
    }

    /// Refuses a worker lacking a value that a registered job of a served queue needs
    /// (a job that reaches it by a per-call queue is checked when it runs).
    pub(super) fn check_jobs_have_their_data(
        registry: &Registry,
        served: &[&str],
        data: &AppData,
    ) -> Result<()> {
        for descriptor in registry.descriptors() {
            if !served.contains(&(descriptor.options)().queue.as_ref()) {
                continue;
            }
            if let Some(need) = data.missing(&(descriptor.needs)()) {
                return Err(Error::MissingData {
                    kind: descriptor.kind.to_owned(),
                    type_name: need.type_name(),
                    given: data.type_names(),
                });
            }
        }
        Ok(())
    }

    /// Refuses a served queue that no registered job names as its queue (unless `allow`).
    pub(super) fn check_queues_have_jobs(registry: &Registry, served: &[&str], allow: bool) -> Result<()> {
        if allow {
            return Ok(());
        }
        let by_queue = registry.kinds_by_queue();
        for queue in served {
            if !by_queue.contains_key(*queue) {
                let registered = if by_queue.is_empty() {
                    "no job is registered at all".to_owned()
                } else {
                    let per_queue: Vec<String> =
                        by_queue.iter().map(|(q, kinds)| format!("`{q}`: {}", kinds.join(", "))).collect();
                    format!("registered: {}", per_queue.join("; "))
                };
                return Err(Error::NoJobsForQueue { queue: (*queue).to_owned(), registered });
            }
        }
        Ok(())
    }

    /// The limits each served queue declares: its own (`QueueConfig`), and for each limit
    /// it leaves unset, the one its registered kinds declare with `limit` (per key for a
    /// kind with `partition_by`, in all otherwise). Kinds of one queue that declare
    /// different limits (or one declares and another not) are refused: the limit is the
    /// queue's.
    pub(super) fn declared_limits(
        registry: &Registry,
        queue: &crate::worker::config::QueueConfig,
    ) -> Result<jobs_driver::DeclaredLimits> {
        let mut declared = queue.limits;
        let kinds: Vec<(&str, crate::options::JobOptions)> = registry
            .descriptors()
            .map(|d| (d.kind, (d.options)()))
            .filter(|(_, o)| o.queue == queue.name.as_str())
            .collect();
        let Some((first_kind, first)) = kinds.iter().find(|(_, o)| o.limit.is_some()) else {
            return Ok(declared);
        };
        let declares = |o: &crate::options::JobOptions| (o.limit, o.partition_by.is_some());
        if let Some((other, _)) = kinds.iter().find(|(_, o)| declares(o) != declares(first)) {
            return Err(Error::InvalidOption {
                option: "limit",
                reason: format!(
                    "queue `{}`: kinds `{first_kind}` and `{other}` declare different limits; a limit is \
                     the queue's, so give the kinds the same `limit` (and `partition_by` or none), or \
                     queues of their own",
                    queue.name
                ),
            });
        }
        let limit = first.limit.map(i64::from);
        if first.partition_by.is_some() {
            declared.per_key_limit = declared.per_key_limit.or(limit);
        } else {
            declared.global_limit = declared.global_limit.or(limit);
        }
        if let Some(n) = declared.global_limit {
            jobs_driver::validation::validate_global_limit(n)?;
        }
        if let Some(n) = declared.per_key_limit {
            jobs_driver::validation::validate_per_key_limit(n)?;
        }
        Ok(declared)
    }
}
