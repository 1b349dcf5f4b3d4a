ALTER TABLE jobs DROP KEY jobs_kind_idx;
