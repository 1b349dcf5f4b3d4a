//! The leader lease: one row per election name, held by one node until it expires.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// `leader_try_acquire`: take lease `name` for `node` for `ttl`, or extend it if `node`
/// holds it. The lease is free when it has expired, or when its holder's node is gone:
/// its row shows no heartbeat for `holder_stale_after`, or its liveness lock is free and
/// its heartbeat older than `lock_lost_grace` (the holder died: leadership follows
/// liveness, not the lease's length; a holder with no node row keeps its lease until it
/// expires). Returns whether `node` leads now.
#[derive(Debug, Clone, Copy)]
pub struct LeaderTryAcquireParams<'a> {
    /// The election.
    pub name: &'a str,
    /// The candidate.
    pub node: &'a str,
    /// How long the lease lasts without renewal.
    pub ttl: Duration,
    /// A holder whose node has not heartbeated for this long is gone.
    pub holder_stale_after: Duration,
    /// A holder whose liveness lock is free is gone once its heartbeat is this old (see
    /// [`JobRescueStuckParams::lock_lost_grace`](crate::JobRescueStuckParams::lock_lost_grace)).
    pub lock_lost_grace: Duration,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}

/// `leader_release`: give the lease up if `node` holds it.
#[derive(Debug, Clone, Copy)]
pub struct LeaderReleaseParams<'a> {
    /// The election.
    pub name: &'a str,
    /// The holder.
    pub node: &'a str,
}

/// `leader_get`: the current holder of lease `name`, if it has not expired.
#[derive(Debug, Clone, Copy)]
pub struct LeaderGetParams<'a> {
    /// The election.
    pub name: &'a str,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}
