-- Each kind's options as the node declares them ({"kind": {"queue": …, "max_attempts": …}},
-- jobs_core::JobOptions::to_published): what the dashboard's form and `jobs-dashboard
-- enqueue`, which do not link the application's jobs, enqueue a kind by name with. NULL
-- for a row a node of an earlier version wrote (read as none).
ALTER TABLE job_nodes ADD COLUMN kind_options TEXT;
