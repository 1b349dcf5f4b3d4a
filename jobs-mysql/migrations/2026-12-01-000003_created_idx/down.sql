ALTER TABLE jobs DROP KEY jobs_created_idx;
