-- A queue's rate limit per partition key (jobs_driver::partition, "A rate per key"): for
-- each key that started jobs lately, the starts its claims counted in each slice of the
-- period (counts: a JSON array, oldest first), the newest slice beginning at window_start
-- (Unix milliseconds); the unkeyed group's row has the key ''. blocked_until (Unix
-- milliseconds): until when the key's rate is used up (claims count such keys to walk past
-- them). The limit itself is in job_queues.settings (per_key_rate_allowed,
-- per_key_rate_period_secs). Written only by claims on the queue, inside the writer's
-- transaction, which also drop the rows that count no start any more.
CREATE TABLE IF NOT EXISTS job_key_rates (
    queue         TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    window_start  INTEGER NOT NULL,
    counts        TEXT    NOT NULL,
    blocked_until INTEGER,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS job_key_rates_blocked_idx ON job_key_rates (queue, blocked_until)
    WHERE blocked_until IS NOT NULL;
CREATE INDEX IF NOT EXISTS job_key_rates_window_idx ON job_key_rates (queue, window_start);
