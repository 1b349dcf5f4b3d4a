-- Every job, wherever it is kept. This backend keeps finished jobs in `jobs` (it has no
-- archive table: see "The archive" in docs/ARCHITECTURE.md), so the view is `jobs` itself;
-- on Postgres it is `jobs` and `jobs_archive` together. Queries that read jobs directly
-- can name `jobs_all` on every backend. (MariaDB and MySQL expand `*` when the view is
-- made: a migration that adds a column to `jobs` must make the view again.)
CREATE VIEW jobs_all AS SELECT * FROM jobs;
