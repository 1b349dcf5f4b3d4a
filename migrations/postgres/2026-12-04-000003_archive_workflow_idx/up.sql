-- A workflow's members in `jobs_archive` (its dashboard page, cancelling or retrying it
-- whole). CONCURRENTLY, outside a transaction (metadata.toml), one index per migration (a
-- file of several statements runs as one transaction): jobs keep flowing while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_archive_workflow_idx ON jobs_archive (workflow_id) WHERE workflow_id IS NOT NULL;
