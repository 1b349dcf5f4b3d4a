-- A node's liveness lock (jobs_driver::NodeLock): the key of the session-level advisory
-- lock its process holds on a connection of its own for as long as it lives. NULL when
-- the node holds none (through a pooler in transaction mode): then only its heartbeat
-- tells that it lives. The rescuer and the leader election read a free lock in pg_locks
-- as the node gone.
ALTER TABLE job_nodes ADD COLUMN lock_key bigint;
