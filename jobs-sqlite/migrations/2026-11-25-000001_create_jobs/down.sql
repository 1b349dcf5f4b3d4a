DROP TABLE job_notifications;
DROP TABLE job_stats;
DROP TABLE job_schedules;
DROP TABLE job_nodes;
DROP TABLE job_leaders;
DROP TABLE job_queues;
DROP TABLE jobs;
