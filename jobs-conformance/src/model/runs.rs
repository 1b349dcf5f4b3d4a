//! What the simulated nodes do with their runs, as a worker does: claim (listing the runs
//! whose handler returned), start, end, finish (writing the outcome), and heartbeat.

use jobs_core::driver::{JobClaimParams, JobCompleteManyParams, JobState, NodeHeartbeatParams};

use super::allowed::Allowed;
use super::nodes::{Run, completion};
use super::ops::{Ending, QUEUES};
use super::system::{System, node_name};

impl System {
    /// A node claims up to `limit` of `queue`'s jobs; the runs are its own unless the reply
    /// is lost.
    pub(super) fn claim(&mut self, node: usize, queue: usize, limit: u8, lose_reply: bool) {
        if !self.nodes[node].alive {
            return;
        }
        let name = node_name(node);
        let limited =
            self.limits[queue].is_some() || self.per_key[queue].is_some() || self.key_rate[queue].is_some();
        let ended = self.nodes[node].ended();
        let params = JobClaimParams {
            queue: QUEUES[queue],
            limit: usize::from(limit),
            node: &name,
            now: Some(self.now),
            recurring_size: false,
            limited,
            declared: Default::default(),
            ended: &ended,
        };
        let claimed = self.block(self.driver().job_claim(params)).expect("claim");
        self.check_claim(queue, usize::from(limit), &ended, &claimed);
        if self.key_rate[queue].is_some() {
            for job in &claimed {
                let key = jobs_core::driver::partition::partition_key_of(&job.meta);
                self.key_starts.entry((queue, key)).or_default().push(self.now);
            }
        }
        if !lose_reply {
            for job in claimed {
                self.nodes[node].runs.push(Run {
                    job: job.id,
                    attempt: job.attempt,
                    max_attempts: job.max_attempts,
                    queue: job.queue,
                    started: false,
                    ended: false,
                });
            }
        }
    }

    /// A node starts one of its claimed runs (calls the handler).
    pub(super) fn start(&mut self, node: usize, pick: usize) {
        let runs = &mut self.nodes[node].runs;
        if let Some(run) = (!runs.is_empty()).then(|| pick % runs.len()).map(|i| &mut runs[i])
            && !run.started
        {
            run.started = true;
            let first = self.started.insert((run.job, run.attempt));
            assert!(first, "job {} ran twice at attempt {}", run.job, run.attempt);
        }
    }

    /// A started run's handler returns; its outcome waits.
    pub(super) fn end(&mut self, node: usize, pick: usize) {
        let runs = &mut self.nodes[node].runs;
        if let Some(run) = (!runs.is_empty()).then(|| pick % runs.len()).map(|i| &mut runs[i])
            && run.started
        {
            run.ended = true;
        }
    }

    /// A node ends one of its runs and writes the outcome.
    pub(super) fn finish(&mut self, node: usize, pick: usize, ending: Ending, allowed: &mut Allowed) {
        let runs = &mut self.nodes[node].runs;
        if runs.is_empty() {
            return;
        }
        let run = runs.remove(pick % runs.len());
        let ending = match (run.started, ending) {
            (false, _) => Ending::HandBack,
            (true, Ending::HandBack) => Ending::Stop,
            (true, e) => e,
        };
        let completion = completion(&run, ending);
        let name = node_name(node);
        let current = self.rows.get(&run.job).is_some_and(|row| {
            row.state == JobState::Running
                && row.attempt == run.attempt
                && row.attempted_by.last() == Some(&name)
        });
        let params = JobCompleteManyParams { completions: &[completion], now: Some(self.now) };
        let applied = self.block(self.driver().job_complete_many(params)).expect("complete");
        assert_eq!(
            applied == vec![run.job],
            current,
            "job {} attempt {} on {name}: an outcome applies exactly when its run is the current one",
            run.job,
            run.attempt
        );
        if run.started {
            allowed.finish.insert(run.job);
        }
        // The completer settles a workflow step's finish for its dependents.
        if !applied.is_empty() && self.rows.get(&run.job).is_some_and(|r| r.workflow_id.is_some()) {
            self.settle(Some(run.job));
        }
    }

    pub(super) fn heartbeat(&self, node: usize, registering: bool) {
        let name = node_name(node);
        let queues = serde_json::json!({});
        let params = NodeHeartbeatParams {
            node: &name,
            host: "model",
            pid: i32::try_from(node).unwrap_or(0),
            queues: &queues,
            kinds: &[],
            kind_options: &serde_json::json!({}),
            now: Some(self.now),
            lock: None,
            registering,
        };
        self.block(self.driver().node_heartbeat(params)).expect("heartbeat");
    }
}
