-- An application's own migration (tests/tests/app_migrations.rs), in SQL every backend takes.
CREATE TABLE app_orders (id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL);
