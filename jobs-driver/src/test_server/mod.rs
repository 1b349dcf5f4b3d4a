//! Test support shared by the drivers' throwaway servers (feature `testing`): what a test
//! needs to start a database server from its installed binaries and share it between the
//! test processes of one run, written once for every driver.
//!
//! - [`ServerUser`]: a server refuses to run as root; when the tests do, it runs as its own
//!   user (`runuser -u postgres -- …`) in a directory given to that user.
//! - [`SharedDir`]: the one server every test process of a run shares, started by the
//!   first under a file lock, joined by the others, stopped by a watchdog a few seconds
//!   after all of them (and their parents) exited.
//! - [`private_dir`], [`free_port`], [`run`], [`wait_until`]: a directory of one's own, a
//!   port nobody listens on, a set-up command that must succeed, and the one wait on a
//!   server process's state.
//! - [`replace_database`]: another database's URL on the same server.
//!
//! A driver's `testing` module keeps only what is its server's own: how to initialise,
//! start, stop and reach it.

mod process;
mod shared;
mod urls;
mod wait;

pub use process::{ServerUser, free_port, private_dir, run, running_as_root};
pub use shared::{SharedDir, kill_pid_file};
pub use urls::replace_database;
pub use wait::wait_until;
