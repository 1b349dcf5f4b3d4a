//! Queues: their pause flag shared by every node, and their pending work.

/// One queue's pending work, for the overview and queues pages. Drivers load it directly
/// (`QueryableByName`: columns named as the fields).
#[derive(Debug, Clone, PartialEq, diesel::QueryableByName)]
pub struct QueueDepth {
    /// Queue name.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue: String,
    /// Available jobs.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub available: i64,
    /// Scheduled jobs.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub scheduled: i64,
    /// Running jobs.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub running: i64,
    /// Retryable jobs.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub retryable: i64,
    /// Seconds the oldest available job has waited (its latency).
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Double>)]
    pub oldest_available_secs: Option<f64>,
    /// Whether the queue is paused.
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub paused: bool,
}

/// `queue_set_paused`: pause (`true`) or resume (`false`) `queue` on every node. The flag
/// is stored; nodes are told by notification where the driver has them, and read it at
/// their next poll otherwise.
#[derive(Debug, Clone, Copy)]
pub struct QueueSetPausedParams<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Paused or not.
    pub paused: bool,
}

/// `queue_set_concurrency`: how many of `queue`'s jobs each node runs at once, for every
/// node, overriding each node's own setting (`None`: back to each node's own). Nodes read
/// it at their next poll; jobs running beyond a lowered limit finish, and no more start.
/// Creates the queue's stored row if needed. Validated with
/// [`validate_concurrency`](crate::validation::validate_concurrency).
#[derive(Debug, Clone, Copy)]
pub struct QueueSetConcurrencyParams<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Slots per node, or `None` for each node's own setting.
    pub concurrency: Option<i32>,
}

/// `queue_set_limits`: `queue`'s cluster-wide limits, which every node's claims obey
/// together (see [`ClaimLimits`](crate::ClaimLimits)); `None` removes that limit. Nodes
/// read them at their next poll; jobs running beyond a lowered limit finish, and no more
/// start. Creates the queue's stored row if needed. Validated with
/// [`validate_global_limit`](crate::validation::validate_global_limit) and
/// [`validate_rate_limit`](crate::validation::validate_rate_limit).
#[derive(Debug, Clone, Copy)]
pub struct QueueSetLimitsParams<'a> {
    /// The queue.
    pub queue: &'a str,
    /// At most this many of its jobs running at once across the cluster.
    pub global_limit: Option<i32>,
    /// At most this many of its jobs running at once per partition key, across the
    /// cluster (see [`partition`](crate::partition)).
    pub per_key_limit: Option<i32>,
    /// At most this many of its jobs started per period across the cluster.
    pub rate: Option<crate::queue_limits::RateLimit>,
    /// At most this many of its jobs started per period per partition key, across the
    /// cluster (see [`partition`](crate::partition)).
    pub per_key_rate: Option<crate::queue_limits::RateLimit>,
}

/// `queue_settings`: what is stored for one queue (`Some`) or every queue with a stored
/// row (`None`), by name.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueSettingsParams<'a> {
    /// One queue, or all.
    pub queue: Option<&'a str>,
}

/// A queue's stored, cluster-wide settings.
#[derive(Debug, Clone, PartialEq, Eq, diesel::QueryableByName)]
pub struct QueueSettings {
    /// Queue name.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub queue: String,
    /// Whether it is paused.
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub paused: bool,
    /// Slots per node set for the cluster, if any.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub concurrency: Option<i64>,
    /// At most this many of its jobs running at once across the cluster, if set.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub global_limit: Option<i64>,
    /// At most this many of its jobs running at once per partition key, if set.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub per_key_limit: Option<i64>,
    /// The rate limit's jobs per period, if set.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub rate_allowed: Option<i64>,
    /// The rate limit's period in seconds, if set.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub rate_period_secs: Option<i64>,
    /// The per-key rate limit's jobs per period, if set.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub per_key_rate_allowed: Option<i64>,
    /// The per-key rate limit's period in seconds, if set.
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    pub per_key_rate_period_secs: Option<i64>,
}

impl QueueSettings {
    /// The rate limit, if one is set.
    pub fn rate(&self) -> Option<crate::queue_limits::RateLimit> {
        crate::queue_limits::RateLimit::new(self.rate_allowed?, self.rate_period_secs?)
    }

    /// The rate limit per partition key, if one is set.
    pub fn per_key_rate(&self) -> Option<crate::queue_limits::RateLimit> {
        crate::queue_limits::RateLimit::new(self.per_key_rate_allowed?, self.per_key_rate_period_secs?)
    }

    /// Whether claims on this queue must obey cluster-wide limits
    /// ([`JobClaimParams::limited`](crate::JobClaimParams::limited)).
    pub fn limited(&self) -> bool {
        self.global_limit.is_some()
            || self.per_key_limit.is_some()
            || self.rate().is_some()
            || self.per_key_rate().is_some()
    }
}

/// `queue_is_paused`: whether `queue` is paused.
#[derive(Debug, Clone, Copy)]
pub struct QueueIsPausedParams<'a> {
    /// The queue.
    pub queue: &'a str,
}

/// `queue_list_paused`: the names of every paused queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueListPausedParams {}

/// `queue_list_depths`: every queue with pending jobs, a stored setting, or a node
/// running it, by name.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueListDepthsParams {}

/// `queue_limits_usage`: how much of `queue`'s limits is in use, for the dashboard. Reads
/// the running jobs per partition key (a queue's running jobs are few: its slots across
/// the cluster), never all of its waiting ones: a key's waiting jobs are counted for the
/// `top` busiest keys only, each up to `cap`.
#[derive(Debug, Clone, Copy)]
pub struct QueueLimitsUsageParams<'a> {
    /// The queue.
    pub queue: &'a str,
    /// The per-key limit in force: keys running this many or more are at it.
    pub per_key_limit: Option<i64>,
    /// How many of the busiest keys to return.
    pub top: usize,
    /// The most waiting jobs counted per key.
    pub cap: i64,
}

/// What [`QueueLimitsUsageParams`] reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsUsage {
    /// The rate's starts as stored by the last limited claim (`None` before the first).
    pub rate_window: Option<crate::queue_limits::RateWindow>,
    /// Keys with running jobs (the unkeyed jobs, when any run, count as one).
    pub keys_running: i64,
    /// Of those, the keys at the per-key limit (their waiting jobs wait for them).
    pub keys_at_limit: i64,
    /// Keys whose per-key rate is used up now (the unkeyed group counts as one).
    pub keys_rate_used_up: i64,
    /// The busiest keys: most running first, then by key (the unkeyed group first).
    pub busiest: Vec<KeyLoad>,
}

/// One partition key's load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLoad {
    /// The key (`None`: the unkeyed jobs).
    pub key: Option<String>,
    /// Its running jobs.
    pub running: i64,
    /// Its available jobs, counted up to the cap (`None` for the unkeyed group, whose
    /// count would read every waiting job of the queue where the key index holds only
    /// keyed jobs).
    pub available: Option<i64>,
}

impl LimitsUsage {
    /// The usage from the busiest keys' rows (each carrying the totals) and the stored
    /// rate window.
    pub fn from_rows(
        rows: Vec<crate::rows::KeyLoadRow>,
        rate_window: Option<crate::queue_limits::RateWindow>,
    ) -> LimitsUsage {
        let (keys_running, keys_at_limit) =
            rows.first().map_or((0, 0), |r| (r.keys_running, r.keys_at_limit));
        let busiest = rows
            .into_iter()
            .map(|r| KeyLoad { key: r.key, running: r.running, available: r.available })
            .collect();
        LimitsUsage { rate_window, keys_running, keys_at_limit, keys_rate_used_up: 0, busiest }
    }
}
