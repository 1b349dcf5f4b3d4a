-- A node's liveness lock (jobs_driver::NodeLock): the name of the user-level lock
-- (GET_LOCK) its process holds on a connection of its own for as long as it lives. NULL
-- when the node holds none. The rescuer and the leader election read a free lock
-- (IS_USED_LOCK(lock_name) IS NULL) as the node gone.
ALTER TABLE job_nodes ADD COLUMN lock_name VARCHAR(64) NULL;
