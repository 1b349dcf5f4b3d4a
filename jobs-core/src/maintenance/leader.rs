//! Leader election by a lease with an expiry: one node at a time runs the maintenance
//! services. The leader renews well before expiry; if it dies, another node takes over
//! once the lease expires; on clean shutdown it releases the lease at once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use jobs_driver::{LeaderReleaseParams, LeaderTryAcquireParams};

use super::service_context::ServiceContext;
use crate::error::{Error, Result};
use crate::settings;

/// Settings of the [`LeaderElector`].
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// The lease's name (one leader per name).
    pub name: String,
    /// How long a lease lasts without renewal.
    pub ttl: Duration,
    /// How often to try to take or renew it.
    pub interval: Duration,
    /// A leader whose node has not heartbeated for this long is gone: another node takes
    /// the lease at its next try, before the lease runs out. Longer than the heartbeat
    /// interval.
    pub holder_stale_after: Duration,
    /// A leader whose liveness lock is free (its process died) is gone once its node's
    /// heartbeat is this old: another node takes the lease at its next try. Longer than
    /// the heartbeat interval (see [`RescuerConfig::lock_lost_grace`](super::RescuerConfig::lock_lost_grace)).
    pub lock_lost_grace: Duration,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        LeaderConfig {
            name: "default".into(),
            ttl: Duration::from_secs(15),
            interval: Duration::from_secs(1),
            holder_stale_after: Duration::from_secs(6),
            lock_lost_grace: Duration::from_millis(1_500),
        }
    }
}

impl LeaderConfig {
    /// Checks the settings: a name, a positive interval, and a lease longer than the
    /// interval (or it would lapse between renewals).
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::InvalidOption { option: "leader.name", reason: "must not be empty".into() });
        }
        settings::period("leader.interval", self.interval)?;
        settings::period("leader.ttl", self.ttl)?;
        settings::period("leader.holder_stale_after", self.holder_stale_after)?;
        settings::period("leader.lock_lost_grace", self.lock_lost_grace)?;
        settings::longer_than("leader.ttl", self.ttl, "leader.interval", self.interval)
    }
}

/// Takes and renews the leader lease.
#[derive(Debug, Clone, Default)]
pub struct LeaderElector {
    config: LeaderConfig,
}

impl LeaderElector {
    /// An elector with `config`.
    pub fn new(config: LeaderConfig) -> LeaderElector {
        LeaderElector { config }
    }

    /// Tries to take or renew the lease once; records and returns whether this node leads.
    /// A lease taken or renewed lets the node lead until the lease's length after the
    /// attempt started (see [`ServiceContext::is_leader`]), whatever the next attempt does.
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<bool> {
        self.config.validate()?;
        let started = tokio::time::Instant::now();
        let params = LeaderTryAcquireParams {
            name: &self.config.name,
            node: &ctx.node,
            ttl: self.config.ttl,
            holder_stale_after: self.config.holder_stale_after,
            lock_lost_grace: self.config.lock_lost_grace,
            now: ctx.clock.db_now(),
        };
        let leader = match ctx.driver.leader_try_acquire(params).await {
            Ok(leader) => leader,
            Err(e) => {
                ctx.note_database_failure();
                return Err(e.into());
            }
        };
        let until =
            leader.then(|| started + self.config.ttl).filter(|until| tokio::time::Instant::now() < *until);
        if until.is_some() != ctx.is_leader() {
            tracing::info!(node = %ctx.node, leader = until.is_some(), "leadership changed");
        }
        ctx.set_leader(until);
        Ok(until.is_some())
    }

    /// Renews every interval until `stop` fires, then releases the lease.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        if let Err(e) = self.config.validate() {
            tracing::error!(error = %e, "not electing a leader with an invalid configuration");
            return;
        }
        let mut ticker = tokio::time::interval(self.config.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = ticker.tick() => {
                    if let Err(e) = self.run_once(&ctx).await {
                        // Without a renewal we cannot be sure we still lead.
                        ctx.set_leader(None);
                        tracing::warn!(error = %e, "leader election failed");
                    }
                }
            }
        }
        if ctx.is_leader() {
            ctx.set_leader(None);
            let params = LeaderReleaseParams { name: &self.config.name, node: &ctx.node };
            if let Err(e) = ctx.driver.leader_release(params).await {
                tracing::warn!(error = %e, "releasing the leader lease failed; it will expire");
            }
        }
    }
}
