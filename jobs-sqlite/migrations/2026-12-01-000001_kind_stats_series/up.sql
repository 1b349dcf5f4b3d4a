-- kind_stats::kinds: the kinds page sums each kind's counters over a window. Grouped by
-- (kind, metric, idx) in this index's order, the sum streams instead of sorting every row
-- of the window first (a week of 120 busy kinds is half a million rows). `count` is in
-- the index so that the rows need not be read. The counters are written about once a
-- second per node, so the entry it costs each write is little.
CREATE INDEX IF NOT EXISTS job_kind_stats_series_idx ON job_kind_stats (kind, metric, idx, bucket, count);
