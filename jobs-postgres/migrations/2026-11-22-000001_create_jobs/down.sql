DROP TABLE IF EXISTS job_stats;
DROP TABLE IF EXISTS job_schedules;
DROP TABLE IF EXISTS job_nodes;
DROP TABLE IF EXISTS job_leaders;
DROP TABLE IF EXISTS job_queues;
DROP TABLE IF EXISTS jobs;
DROP FUNCTION IF EXISTS jobs_search_document(jsonb, jsonb);
DROP TYPE IF EXISTS job_state;
