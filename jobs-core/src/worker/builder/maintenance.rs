//! The builder's settings of the leader's maintenance services (`maintenance/`).

use super::WorkerBuilder;
use crate::cron::Periodic;
use crate::maintenance::{
    ArchiverConfig, CronConfig, LeaderConfig, PrunerConfig, RescuerConfig, SchedulerConfig, SettlerConfig,
};

impl WorkerBuilder {
    /// Does not take part in leader election, so never runs the maintenance services.
    pub fn without_maintenance(mut self) -> Self {
        self.maintenance = false;
        self
    }

    /// Leader election settings.
    pub fn leader(mut self, config: LeaderConfig) -> Self {
        self.leader = config;
        self
    }

    /// Scheduler settings.
    pub fn scheduler(mut self, config: SchedulerConfig) -> Self {
        self.scheduler = config;
        self
    }

    /// Rescuer settings.
    pub fn rescuer(mut self, config: RescuerConfig) -> Self {
        self.rescuer = config;
        self
    }

    /// Archiver settings (drivers with an archive table: Postgres).
    pub fn archiver(mut self, config: ArchiverConfig) -> Self {
        self.archiver = config;
        self
    }

    /// Settler settings (workflows' safety net).
    pub fn settler(mut self, config: SettlerConfig) -> Self {
        self.settler = config;
        self
    }

    /// Pruner settings.
    pub fn pruner(mut self, config: PrunerConfig) -> Self {
        self.pruner = config;
        self
    }

    /// Cron enqueuer settings.
    pub fn cron(mut self, config: CronConfig) -> Self {
        self.cron = config;
        self
    }

    /// Adds a periodic job (besides those declared with `#[job(cron = ...)]`).
    pub fn schedule(mut self, schedule: Periodic) -> Self {
        self.schedules.push(schedule);
        self
    }
}
