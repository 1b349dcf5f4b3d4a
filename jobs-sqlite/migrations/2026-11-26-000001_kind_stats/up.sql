-- Per-kind counters by minute (bucket: Unix milliseconds), for the dashboard's kinds page: outcomes, and how long
-- attempts ran and waited as histograms. Written by each worker's completer about once a
-- second with job_stats, pruned with it.
--   metric = 'completed' | 'retried' | 'discarded' | 'cancelled': idx 0, count = jobs;
--   metric = 'run_ms' | 'wait_ms': idx = the log2 bucket (0: at most 1 ms; i: more than
--   2^(i-1) and at most 2^i ms), count = attempts in it.
CREATE TABLE job_kind_stats (
    bucket  INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    metric  TEXT    NOT NULL,
    idx     INTEGER NOT NULL,
    count   INTEGER NOT NULL,
    PRIMARY KEY (bucket, kind, metric, idx)
) STRICT;
