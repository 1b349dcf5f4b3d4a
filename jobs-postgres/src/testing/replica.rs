//! [`PgCluster::start_replica`]: a streaming replica of a test cluster, for the tests of
//! reading from a hot standby.

use jobs_driver::Result;
use jobs_driver::test_server::{private_dir, run};

use super::PgCluster;

impl PgCluster {
    /// Starts a streaming replica of this cluster: a hot standby in a directory of its
    /// own, made from a base backup taken now (`pg_basebackup -R`), replaying the WAL it
    /// streams from this cluster. Stopped and removed when dropped. Take it of a small
    /// cluster (a private one): the backup copies every database.
    pub fn start_replica(&self) -> Result<PgCluster> {
        let dir = private_dir("pg-replica")?;
        let mut settings = self.settings.clone();
        settings.push(("hot_standby".to_owned(), "on".to_owned()));
        let replica = PgCluster { dir, bin: self.bin.clone(), user: self.user, settings, owned: true };
        replica.user.give(&replica.dir)?;
        let mut backup = replica.command("pg_basebackup");
        backup.arg("-D").arg(replica.data_dir()).arg("-h").arg(&self.dir).args([
            "-U",
            "postgres",
            "-X",
            "stream",
            "-R",
            "--checkpoint=fast",
            "--no-sync",
        ]);
        run(&mut backup, "pg_basebackup")?;
        replica.start()?;
        Ok(replica)
    }
}
