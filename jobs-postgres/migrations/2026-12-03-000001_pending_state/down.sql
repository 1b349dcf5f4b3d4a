-- Postgres cannot remove a value from an enum. The value stays, unused: the up migration
-- adds it only if it is missing.
SELECT 1;
