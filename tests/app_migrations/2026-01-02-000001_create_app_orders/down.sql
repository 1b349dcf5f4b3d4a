DROP TABLE app_orders;
