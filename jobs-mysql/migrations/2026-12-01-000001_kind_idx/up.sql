-- jobs::list: the dashboard's filter by kind. This table keeps every finished job, so one
-- kind of 120 is found, without it, by reading every row: 0.57 s for any kind page at 1 M
-- jobs (its count reads the whole table), with it a range of this index.
--
-- An entry is written once, at insert: neither column ever changes, so claims, completions
-- and retries do not touch it (InnoDB rewrites a secondary index entry only when its
-- columns change). What it costs an enqueue is in docs/benchmarks.md.
ALTER TABLE jobs ADD KEY jobs_kind_idx (kind, id);
