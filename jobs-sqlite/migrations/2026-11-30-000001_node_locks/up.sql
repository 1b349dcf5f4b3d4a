-- A node's liveness lock (jobs_driver::NodeLock): the file beside the database its
-- process holds an exclusive lock (flock) on for as long as it lives, and into which its
-- heartbeat writes the time. NULL when the node holds none. The rescuer and the leader
-- election of any process read a lock they can take as the node gone, and a held lock's
-- time as its heartbeat when the database's write lock kept the row's out.
ALTER TABLE job_nodes ADD COLUMN lock_path TEXT;
