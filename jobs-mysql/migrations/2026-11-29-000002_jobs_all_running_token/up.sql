-- `jobs_all` again, with `running_token`: MariaDB and MySQL expand `*` when a view is
-- made. (Its own step, so that each migration is one statement and can be run again.)
CREATE OR REPLACE VIEW jobs_all AS SELECT * FROM jobs;
