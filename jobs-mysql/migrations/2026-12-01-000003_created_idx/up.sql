-- jobs::list: the dashboard's created from/to window, newest (or oldest) first. This table
-- keeps every finished job, so without it a window is found by reading every row (0.53 s
-- at 1 M jobs, its count as long again when the window is empty).
--
-- Written once, at insert (`created_at` never changes), so claims, completions and retries
-- do not touch it. What it costs an enqueue is in docs/benchmarks.md.
ALTER TABLE jobs ADD KEY jobs_created_idx (created_at, id);
