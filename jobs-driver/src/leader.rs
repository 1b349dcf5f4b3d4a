//! The leader lease: one row per election name, held by one node until it expires.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// `leader_try_acquire`: take lease `name` for `node` for `ttl`, or extend it if `node`
/// holds it. Returns whether `node` leads now.
#[derive(Debug, Clone, Copy)]
pub struct LeaderTryAcquireParams<'a> {
    /// The election.
    pub name: &'a str,
    /// The candidate.
    pub node: &'a str,
    /// How long the lease lasts without renewal.
    pub ttl: Duration,
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
