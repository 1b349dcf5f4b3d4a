//! Leader election by a lease with an expiry: one node at a time runs the maintenance
//! services. The leader renews well before expiry; if it dies, another node takes over
//! once the lease expires; on clean shutdown it releases the lease at once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ServiceContext;
use crate::db;
use crate::error::Result;

/// Settings of the [`LeaderElector`].
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// The lease's name (one leader per name).
    pub name: String,
    /// How long a lease lasts without renewal.
    pub ttl: Duration,
    /// How often to try to take or renew it.
    pub interval: Duration,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        LeaderConfig {
            name: "default".into(),
            ttl: Duration::from_secs(15),
            interval: Duration::from_secs(3),
        }
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
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<bool> {
        let mut conn = ctx.pool.get().await?;
        let leader = db::leader::try_acquire(
            &mut conn,
            &self.config.name,
            &ctx.node,
            self.config.ttl,
            ctx.clock.db_now(),
        )
        .await?;
        if leader != ctx.is_leader() {
            tracing::info!(node = %ctx.node, leader, "leadership changed");
        }
        ctx.set_leader(leader);
        Ok(leader)
    }

    /// Renews every interval until `stop` fires, then releases the lease.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        let mut ticker = tokio::time::interval(self.config.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = ticker.tick() => {
                    if let Err(e) = self.run_once(&ctx).await {
                        // Without a renewal we cannot be sure we still lead.
                        ctx.set_leader(false);
                        tracing::warn!(error = %e, "leader election failed");
                    }
                }
            }
        }
        if ctx.is_leader() {
            ctx.set_leader(false);
            if let Ok(mut conn) = ctx.pool.get().await
                && let Err(e) = db::leader::release(&mut conn, &self.config.name, &ctx.node).await
            {
                tracing::warn!(error = %e, "releasing the leader lease failed; it will expire");
            }
        }
    }
}
