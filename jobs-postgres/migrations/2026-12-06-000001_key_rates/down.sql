DROP TABLE IF EXISTS job_key_rates;
