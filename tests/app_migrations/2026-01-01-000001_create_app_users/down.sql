DROP TABLE app_users;
