//! [`PgCluster::start_replica`]: a streaming replica of a test cluster, for the tests of
//! reading from a hot standby.

use std::fs;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use jobs_driver::Result;

use super::PgCluster;

impl PgCluster {
    /// Starts a streaming replica of this cluster: a hot standby in a directory of its
    /// own, made from a base backup taken now (`pg_basebackup -R`), replaying the WAL it
    /// streams from this cluster. Stopped and removed when dropped. Take it of a small
    /// cluster (a private one): the backup copies every database.
    pub fn start_replica(&self) -> Result<PgCluster> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "jobs-pg-replica-{}-{}-{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>()
        ));
        fs::create_dir_all(&dir)?;
        let mut settings = self.settings.clone();
        settings.push(("hot_standby".to_owned(), "on".to_owned()));
        let replica =
            PgCluster { dir, bin: self.bin.clone(), as_postgres: self.as_postgres, settings, owned: true };
        if replica.as_postgres {
            replica.run(Command::new("chown").arg("postgres:").arg(&replica.dir), "chown")?;
        }
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
        replica.run(&mut backup, "pg_basebackup")?;
        replica.start()?;
        Ok(replica)
    }
}
