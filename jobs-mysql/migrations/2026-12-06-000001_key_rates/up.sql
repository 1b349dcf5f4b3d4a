-- A queue's rate limit per partition key (jobs_driver::partition, "A rate per key"): for
-- each key that started jobs lately, the starts its claims counted in each slice of the
-- period (counts: a JSON array, oldest first), the newest slice beginning at window_start
-- (UTC); the unkeyed group's row has the key ''. blocked_until: until when the key's rate
-- is used up (claims count such keys to walk past them). The limit itself is in
-- job_queues.settings (per_key_rate_allowed, per_key_rate_period_secs). Written only by
-- claims on the queue, under its row's lock, which also drop the rows that count no start
-- any more. Keys compare in binary, as the engine and jobs.partition_key compare them.
CREATE TABLE IF NOT EXISTS job_key_rates (
    queue         VARCHAR(255) NOT NULL,
    `key`         VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    window_start  DATETIME(6)  NOT NULL,
    counts        TEXT         NOT NULL,
    blocked_until DATETIME(6)  NULL,
    PRIMARY KEY (queue, `key`),
    KEY job_key_rates_blocked_idx (queue, blocked_until),
    KEY job_key_rates_window_idx (queue, window_start)
);
