-- An application's own migration (tests/tests/app_migrations.rs), in SQL every backend takes.
CREATE TABLE app_users (id BIGINT NOT NULL PRIMARY KEY, email VARCHAR(255) NOT NULL);
