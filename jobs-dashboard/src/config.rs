//! How the dashboard is set up ([`DashboardConfig`]), and what every handler shares.

use std::sync::Arc;

use jobs_core::IntoDriver;
use jobs_core::driver::{Capability, Driver};

use crate::access::{self, AllowAll, Authorize};
use crate::audit::{Audit, LogActions, SharedAudit};

/// How the dashboard is set up.
#[derive(Clone)]
pub struct DashboardConfig {
    pub(crate) driver: Arc<dyn Driver>,
    /// Where pages read, when not from `driver`: a read-only replica.
    pub(crate) replica: Option<Arc<dyn Driver>>,
    pub(crate) auth: access::SharedAuthorize,
    pub(crate) audit: SharedAudit,
    pub(crate) refresh_seconds: u32,
    /// Whether access was chosen ([`authorize`](Self::authorize) or
    /// [`open_to_everyone`](Self::open_to_everyone)); if not, mounting it warns.
    pub(crate) access_chosen: bool,
}

impl std::fmt::Debug for DashboardConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DashboardConfig")
            .field("driver", &self.driver.name())
            .field("replica", &self.replica.as_ref().map(|r| r.name()))
            .field("refresh_seconds", &self.refresh_seconds)
            .finish_non_exhaustive()
    }
}

impl DashboardConfig {
    /// A dashboard on `driver` (or a pool a driver wraps: today's `DashboardConfig::new(pool)`),
    /// open to everyone ([`AllowAll`]) until you set [`authorize`](Self::authorize); mounted
    /// so, it logs a warning once (say [`open_to_everyone`](Self::open_to_everyone) if you
    /// mean it). It
    /// reads and acts only through the driver, and hides what the driver cannot do: without
    /// [`Capability::JsonContainment`] there is no search of arguments and metadata.
    pub fn new(driver: impl IntoDriver) -> DashboardConfig {
        DashboardConfig {
            driver: driver.into_driver(),
            replica: None,
            auth: Arc::new(AllowAll),
            audit: Arc::new(LogActions),
            refresh_seconds: 5,
            access_chosen: false,
        }
    }

    /// Pages read from `replica`, a driver on a read-only replica of the same database
    /// (a Postgres hot standby: `DashboardConfig::new(primary_pool).read_from(replica_pool)`),
    /// so that browsing never loads the primary; actions (and the count a bulk action's
    /// confirmation shows) still go to the primary. The overview shows how far the replica
    /// is behind: what a page shows may be that old.
    pub fn read_from(mut self, replica: impl IntoDriver) -> DashboardConfig {
        self.replica = Some(replica.into_driver());
        self
    }

    /// The driver pages read through: the replica if there is one.
    pub(crate) fn reads(&self) -> &dyn Driver {
        self.replica.as_deref().unwrap_or(&*self.driver)
    }

    /// Whether the driver can search arguments and metadata (the jobs page's search box).
    pub(crate) fn can_search(&self) -> bool {
        self.reads().capabilities().has(Capability::JsonContainment)
    }

    /// The hook deciding each request's [`Access`](crate::Access).
    pub fn authorize(mut self, auth: impl Authorize) -> DashboardConfig {
        self.auth = Arc::new(auth);
        self.access_chosen = true;
        self
    }

    /// Says that the dashboard is open to everyone who reaches it, actions included, on
    /// purpose (behind a VPN, or an auth proxy in front of the app): mounting it then does
    /// not warn.
    pub fn open_to_everyone(mut self) -> DashboardConfig {
        self.auth = Arc::new(AllowAll);
        self.access_chosen = true;
        self
    }

    /// The warning mounting this dashboard at `base` logs, when nobody chose who may use it.
    pub(crate) fn open_warning(&self, base: &str) -> Option<String> {
        (!self.access_chosen).then(|| {
            format!(
                "the jobs dashboard at `{base}` is open to everyone who reaches it, retry, cancel and \
                 delete included: give it `.authorize(hook)` (see `Authorize`), or call \
                 `.open_to_everyone()` to say you mean it"
            )
        })
    }

    /// Calls `audit` after every action (retry, cancel, delete, enqueue, pause, …) with the
    /// request and what it did: who did what, for your audit log. The default logs each
    /// action with `tracing` ([`LogActions`]).
    pub fn on_action(mut self, audit: impl Audit) -> DashboardConfig {
        self.audit = Arc::new(audit);
        self
    }

    /// How often live refresh reloads a page (default 5 s).
    pub fn refresh_seconds(mut self, seconds: u32) -> DashboardConfig {
        self.refresh_seconds = seconds.max(1);
        self
    }
}

/// Shared by every handler.
pub(crate) struct Dashboard {
    pub(crate) config: DashboardConfig,
    /// Where the dashboard is mounted (`/jobs`), without a trailing slash.
    pub(crate) base: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> DashboardConfig {
        let driver =
            jobs_core::driver_for_url("sqlite://unused-dashboard-config-test.db", 1).expect("driver");
        DashboardConfig::new(driver)
    }

    #[test]
    fn a_dashboard_nobody_chose_access_for_warns_when_mounted() {
        let warning = config().open_warning("/jobs").expect("open by default warns");
        assert!(
            warning.contains("`/jobs` is open to everyone") && warning.contains(".authorize("),
            "{warning}"
        );
        assert!(config().open_to_everyone().open_warning("/jobs").is_none());
        assert!(
            config()
                .authorize(|_: &actix_web::HttpRequest| crate::Access::ReadOnly)
                .open_warning("/jobs")
                .is_none()
        );
    }
}
