//! One producer per queue: claims jobs in batches sized to the queue's free slots plus
//! its buffer's target, starts as many as slots are free, and buffers the rest (see
//! `buffer` and `prefetch`). Executors take buffered jobs themselves as their slots free;
//! the producer refills the buffer when it falls to half its target, hands back what
//! waited too long, and empties it when the queue is paused or the worker stops.
//!
//! Up to `claims_in_flight` claim statements (default 1) run at once, each for its share
//! of the slots, so that with more than one the queue's next batch is on its way while
//! the last one still runs. A claim reserves its slots before it is sent and gives back
//! the ones it did not fill.
//!
//! While claims come back full it claims again at once; when one comes back short the
//! queue looked empty, and it waits for a NOTIFY from an insert (or the scheduler), a
//! poll tick, or shutdown. It never claims for a paused queue. A queue with cluster-wide
//! limits claims under them (see `jobs_driver::ClaimLimits`) and buffers nothing. At
//! shutdown it stops claiming, waits for the claims in flight, and hands back every
//! buffered job (its attempt given back, its place kept); the running ones finish or are
//! handed back by the shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use jobs_driver::{ClaimedJob, JobClaimParams};

use super::buffer::Buffered;
use super::executor;
use super::prefetch;
use super::shared::{QueueRuntime, Shared};
use crate::retry_pause::RetryPause;

/// What one claim brought back, with the slots it reserved.
struct Claimed {
    wanted: usize,
    slots: OwnedSemaphorePermit,
    jobs: crate::error::Result<Vec<ClaimedJob>>,
    /// How many wake-ups had arrived when the claim was sent ([`Plan::wakes`]).
    wakes_before: u64,
}

/// The producer's view of its queue between events.
struct Plan {
    /// The last claim came back short: wait for a wake-up or a tick before claiming.
    idle: bool,
    /// A claim failed: claim again no sooner than this.
    retry_at: Option<Instant>,
    error_pause: RetryPause,
    /// Slots became free while too few to fill a batch: claim anyway at this time.
    cooldown_until: Option<Instant>,
    /// Wake-ups (notifications, poll ticks) received so far.
    wakes: u64,
    /// How many jobs to keep buffered (see `prefetch`), as of the last look.
    target: usize,
    /// Buffered jobs went back for waiting too long when this many runs were recorded:
    /// buffer nothing until another run ends.
    stalled_at: Option<u64>,
    /// Jobs asked for by the claims in flight (counted with the buffer, so that claims
    /// in flight at once do not each refill it).
    requested: usize,
}

impl Plan {
    /// Jobs may have become available: claim again.
    fn wake(&mut self) {
        self.idle = false;
        self.wakes += 1;
    }

    /// A claim sent when `wakes_before` wake-ups had arrived brought back `got` of `wanted`
    /// jobs. Short means the queue looked empty when the claim read it, but a wake-up that
    /// arrived while it ran may be for jobs it could not see: then claim again rather than
    /// wait for the next one (or for the poll tick, up to `poll_interval` later).
    fn claim_returned(&mut self, wanted: usize, got: usize, wakes_before: u64) {
        self.idle = got < wanted && self.wakes == wakes_before;
    }
}

/// The pause after a failed claim: 100 ms, doubling up to the poll interval.
fn claim_retry_pause(poll_interval: Duration) -> RetryPause {
    RetryPause::new(Duration::from_millis(100), poll_interval.max(Duration::from_millis(100)))
}

/// Runs until `stop` fires and the claims in flight are back.
pub(crate) async fn run(shared: Arc<Shared>, queue: Arc<QueueRuntime>, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(shared.config.poll_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.reset();
    let mut in_flight = FuturesUnordered::new();
    let mut plan = Plan {
        idle: false,
        retry_at: None,
        error_pause: claim_retry_pause(shared.config.poll_interval),
        cooldown_until: None,
        wakes: 0,
        target: 0,
        stalled_at: None,
        requested: 0,
    };
    loop {
        if stop.is_cancelled() {
            // Closed first, so that nothing more starts from it, not even what the claims
            // in flight bring back.
            let mut left = queue.buffer.lock().unwrap_or_else(|e| e.into_inner()).close();
            while let Some(claimed) = in_flight.next().await {
                start(&shared, &queue, claimed, &mut plan);
            }
            left.extend(queue.buffer.lock().unwrap_or_else(|e| e.into_inner()).take_all());
            hand_back(&shared, left, "the worker is stopping").await;
            return;
        }
        if queue.paused.load(Ordering::Acquire) {
            let left = queue.buffer.lock().unwrap_or_else(|e| e.into_inner()).take_all();
            hand_back(&shared, left, "the queue is paused").await;
        }
        // A limited queue buffers nothing: what was buffered before the limits came goes
        // back, where it would count against them while other nodes' slots stand free.
        let limited = queue.limited.load(Ordering::Acquire);
        if limited {
            let left = queue.buffer.lock().unwrap_or_else(|e| e.into_inner()).take_all();
            hand_back(&shared, left, "the queue has limits for the cluster").await;
        }
        // Buffered jobs and free slots never wait for each other (cheap when either is none).
        dispatch(&shared, &queue);
        let runs = queue.run_time.runs();
        plan.stalled_at = plan.stalled_at.filter(|&at| at == runs);
        plan.target = if plan.stalled_at.is_some() || limited {
            0
        } else {
            queue.prefetch.target(queue.run_time.mean(), queue.limit.current())
        };
        let batch = queue.batch.load(Ordering::Relaxed);
        queue.low_water.store(prefetch::low_water(plan.target), Ordering::Relaxed);
        // Start as many claims as the plan allows.
        while in_flight.len() < shared.config.claims_in_flight
            && let Some(want) = claim_size(&shared, &queue, &plan, batch)
        {
            // Slots freed from here on count towards the next wake-up.
            queue.freed.store(0, Ordering::Release);
            let free = queue.slots.available_permits().min(want);
            let Ok(slots) = queue.slots.clone().try_acquire_many_owned(free as u32) else { break };
            plan.cooldown_until = None;
            let refill = prefetch::refill(plan.target).div_ceil(shared.config.claims_in_flight.max(1));
            let recurring = want == batch || want == refill;
            plan.requested += want;
            in_flight.push(claim(shared.clone(), queue.clone(), want, slots, plan.wakes, recurring));
        }
        let waiting_for_slots = !plan.idle
            && plan.retry_at.is_none()
            && !queue.paused.load(Ordering::Acquire)
            && in_flight.len() < shared.config.claims_in_flight;
        if waiting_for_slots
            && plan.cooldown_until.is_none()
            && plan.target == 0
            && queue.slots.available_permits() > 0
        {
            plan.cooldown_until = Some(Instant::now() + shared.config.fetch_cooldown);
        }
        let cooldown = plan.cooldown_until.filter(|_| waiting_for_slots);
        let stale_at = queue
            .buffer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .oldest()
            .map(|at| Instant::from_std(at + shared.config.prefetch_max_wait));
        tokio::select! {
            _ = stop.cancelled() => {}
            Some(claimed) = in_flight.next(), if !in_flight.is_empty() => start(&shared, &queue, claimed, &mut plan),
            _ = queue.slot_freed.notified(), if waiting_for_slots => {}
            // A limited queue's claim may have come back short for its limits, not for want
            // of jobs: a job ending here frees room under them (other nodes' ends and a
            // rate's next window are seen at the poll tick).
            _ = queue.slot_freed.notified(), if limited && plan.idle => plan.wake(),
            _ = queue.wake.notified() => plan.wake(),
            _ = ticker.tick() => {
                queue.refresh_settings(&shared).await;
                plan.wake();
            }
            _ = sleep_until(plan.retry_at) => plan.retry_at = None,
            _ = sleep_until(cooldown) => {}
            _ = sleep_until(stale_at) => {
                let cutoff = std::time::Instant::now().checked_sub(shared.config.prefetch_max_wait);
                let stale = cutoff.map_or_else(Vec::new, |cutoff| {
                    queue.buffer.lock().unwrap_or_else(|e| e.into_inner()).take_since(cutoff)
                });
                if !stale.is_empty() {
                    plan.stalled_at = Some(queue.run_time.runs());
                }
                hand_back(&shared, stale, "it waited too long for a slot").await;
            }
        }
    }
}

/// Gives buffered jobs back to the queue (available at once, in their place, attempt
/// given back): they are no longer this node's.
async fn hand_back(shared: &Shared, jobs: Vec<Buffered>, why: &str) {
    if jobs.is_empty() {
        return;
    }
    tracing::debug!(count = jobs.len(), why, "handing buffered jobs back");
    ::metrics::counter!(crate::metrics::HANDED_BACK).increment(jobs.len() as u64);
    for b in jobs {
        executor::give_back(shared, b).await;
    }
}

/// The size of the next claim, or `None` if the producer should not claim now: the
/// queue is paused, looked empty, or is backing off after an error; the node lost its
/// name to another process; its buffer is above
/// its low-water mark; or (with no buffer) fewer slots than a batch are free and the
/// cooldown has not passed.
fn claim_size(shared: &Shared, queue: &QueueRuntime, plan: &Plan, batch: usize) -> Option<usize> {
    if plan.idle || plan.retry_at.is_some() || queue.paused.load(Ordering::Acquire) {
        return None;
    }
    // Another process took this node's name: what it would claim would be that
    // process's orphans. It claims again once it holds the name (`liveness`).
    if !shared.owns_name.load(Ordering::Acquire) {
        return None;
    }
    let free = queue.slots.available_permits();
    let target = plan.target;
    if target > 0 {
        // Fill the free slots and bring the buffer back up; while it is above its
        // low-water mark the executors have work and the claim can wait.
        let buffered = queue.buffered() + plan.requested;
        if buffered > prefetch::low_water(target) {
            return None;
        }
        // Claims in flight at once share the refill, as they share the slots.
        let share = (free + prefetch::refill(target)).div_ceil(shared.config.claims_in_flight.max(1));
        return Some(share.clamp(1, shared.config.max_fetch.max(1)));
    }
    if free >= batch {
        return Some(batch);
    }
    // A busy queue frees slots one by one; rather than claim a job or two per statement,
    // give the others a moment (at most `fetch_cooldown`) to free up too.
    let cooled = plan.cooldown_until.is_some_and(|at| Instant::now() >= at);
    (free > 0 && (cooled || shared.config.fetch_cooldown.is_zero())).then_some(free)
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One claim statement for `wanted` jobs, holding their slots.
///
/// The statement runs on a task of its own, so that it runs to its end whatever the
/// producer awaits meanwhile: a claim left unpolled between its statement and its commit
/// would hold its connection, and through a pooler in transaction mode the server
/// connection behind it, which other nodes may be waiting for.
async fn claim(
    shared: Arc<Shared>,
    queue: Arc<QueueRuntime>,
    wanted: usize,
    slots: OwnedSemaphorePermit,
    wakes_before: u64,
    recurring_size: bool,
) -> Claimed {
    queue.fetches.fetch_add(1, Ordering::Relaxed);
    let statement = tokio::spawn(async move {
        let ended = queue.ended_runs();
        let params = JobClaimParams {
            queue: &queue.name,
            limit: wanted,
            node: &shared.node,
            now: shared.clock.db_now(),
            // The size claimed again and again: a driver may keep a statement planned for it.
            recurring_size,
            limited: queue.limited.load(Ordering::Acquire),
            declared: queue.declared,
            ended: &ended,
        };
        shared.driver.job_claim(params).await.map_err(crate::error::Error::from)
    });
    let jobs = statement
        .await
        .unwrap_or_else(|e| Err(crate::error::Error::Runtime(format!("the claim's task failed: {e}"))));
    Claimed { wanted, slots, jobs, wakes_before }
}

/// Takes in the jobs a claim brought back: each is held; as many as the claim reserved
/// slots for start at once (the claim returns them in claim order), and the rest wait in
/// the buffer. Then buffered jobs start on any other free slot, highest priority first.
/// Updates the plan: a short claim means the queue looked empty.
fn start(shared: &Arc<Shared>, queue: &Arc<QueueRuntime>, claimed: Claimed, plan: &mut Plan) {
    let Claimed { wanted, mut slots, jobs, wakes_before } = claimed;
    plan.requested = plan.requested.saturating_sub(wanted);
    match jobs {
        Ok(jobs) => {
            plan.error_pause.succeeded();
            plan.claim_returned(wanted, jobs.len(), wakes_before);
            if !jobs.is_empty() {
                ::metrics::counter!(crate::metrics::CLAIMED, "queue" => queue.label)
                    .increment(jobs.len() as u64);
                ::metrics::counter!(crate::metrics::FETCHES, "queue" => queue.label).increment(1);
            }
            // A buffered job of higher priority than this claim's goes first: then every
            // job queues up in the buffer. Otherwise the reserved slots start the claim's
            // first jobs directly.
            // So does everything once the worker stops or the queue is paused: the buffer
            // is then handed back, and nothing more starts.
            // And so does everything while a lowered concurrency is owed slots: the claim's
            // reservation was made under the old limit.
            let mut buffer_first = {
                let buffer = queue.buffer.lock().unwrap_or_else(|e| e.into_inner());
                buffer.len() > 0
                    || buffer.is_closed()
                    || queue.paused.load(Ordering::Acquire)
                    || queue.limit.owes()
            };
            for job in jobs {
                let held = executor::hold(shared, job);
                match (buffer_first || queue.limit.owes(), slots.split(1)) {
                    (false, Some(slot)) => executor::spawn(shared.clone(), queue.clone(), held, slot),
                    _ => {
                        buffer_first = true;
                        queue.buffer.lock().unwrap_or_else(|e| e.into_inner()).push(held);
                    }
                }
            }
            drop(slots);
            dispatch(shared, queue);
        }
        Err(e) => {
            drop(slots);
            queue.limit.settle(&queue.slots);
            tracing::warn!(queue = %queue.name, error = %e, "fetching jobs failed; retrying");
            plan.retry_at = Some(Instant::now() + plan.error_pause.failed());
        }
    }
}

/// Starts buffered jobs on the free slots, highest priority first.
fn dispatch(shared: &Arc<Shared>, queue: &Arc<QueueRuntime>) {
    // Slots given back unused (a claim's reservation) may be owed to a lowered limit.
    queue.limit.settle(&queue.slots);
    while let Ok(slot) = queue.slots.clone().try_acquire_owned() {
        let next = queue.buffer.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match next {
            Some(job) => executor::spawn(shared.clone(), queue.clone(), job, slot),
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Plan, claim_retry_pause};

    #[test]
    fn a_wake_up_during_a_short_claim_keeps_the_producer_claiming() {
        let mut plan = Plan {
            idle: false,
            retry_at: None,
            error_pause: claim_retry_pause(Duration::from_secs(1)),
            cooldown_until: None,
            wakes: 0,
            target: 0,
            stalled_at: None,
            requested: 0,
        };
        // A claim comes back short with no wake-up since it was sent: the queue is empty.
        let before = plan.wakes;
        plan.claim_returned(10, 3, before);
        assert!(plan.idle);
        // A notification arrives; the claim it triggers is in flight when the next one
        // arrives (for a job that claim could not see), and then comes back short.
        plan.wake();
        let before = plan.wakes;
        plan.wake();
        plan.claim_returned(10, 0, before);
        assert!(!plan.idle, "the second wake-up must lead to another claim");
        // A full claim never idles.
        plan.claim_returned(10, 10, plan.wakes);
        assert!(!plan.idle);
    }
}
