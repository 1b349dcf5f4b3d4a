//! The dashboard's read model: filters, keyset pages, counts, queue depths, throughput,
//! nodes; search and estimates where the backend has them.

use chrono::{DateTime, DurationRound, Utc};
use jobs_core::driver::{
    Capability, Count, JobCountParams, JobFilter, JobListParams, JobOrder, JobState, KindMetric,
    KindStatsCount, NodeHeartbeatParams, NodeListParams, QueueListDepthsParams, QueueSetConcurrencyParams,
    QueueSetPausedParams, QueueSettingsParams, StatsCompactParams, StatsCount, StatsKindsParams,
    StatsPruneParams, StatsRecordParams, StatsThroughputParams,
};
use serde_json::json;

use crate::TestDb;
use crate::factory::{JobFactory, insert_all};

async fn ids(db: &TestDb, filter: &JobFilter) -> Vec<i64> {
    let page = JobListParams { filter, before: None, limit: 1_000 };
    db.driver.job_list_ids(page).await.expect("list")
}

async fn count(db: &TestDb, filter: &JobFilter, cap: i64) -> Count {
    db.driver.job_count(JobCountParams { filter, cap }).await.expect("count")
}

/// Each filter selects exactly its jobs, newest first; pages follow by keyset; counts are
/// exact up to the cap.
pub async fn the_read_model_filters_pages_and_counts(db: TestDb) {
    let now = Utc::now();
    let at = |hours_ago: i64| -> DateTime<Utc> { now - chrono::Duration::hours(hours_ago) };
    let jobs = vec![
        JobFactory::new("mail.send")
            .queue("mail")
            .tag("eu")
            .created_at(at(5))
            .state(JobState::Available, at(5)),
        JobFactory::new("mail.send")
            .queue("mail")
            .created_at(at(4))
            .error("smtp", "Connection RESET by 100%_peer")
            .state(JobState::Discarded, at(4)),
        JobFactory::new("bill.charge")
            .queue("billing")
            .tag("eu")
            .created_at(at(3))
            .state(JobState::Running, at(3)),
        JobFactory::new("bill.charge").queue("billing").created_at(at(2)).state(JobState::Completed, at(2)),
        JobFactory::new("mail.send").queue("mail").created_at(at(1)).state(JobState::Scheduled, at(-1)),
    ];
    let id = insert_all(&*db.driver, jobs).await;
    let all = JobFilter::default();
    assert_eq!(ids(&db, &all).await, vec![id[4], id[3], id[2], id[1], id[0]], "newest first");
    let by = |f: JobFilter| f;
    assert_eq!(
        ids(&db, &by(JobFilter { queue: Some("mail".into()), ..all.clone() })).await,
        vec![id[4], id[1], id[0]]
    );
    assert_eq!(
        ids(&db, &by(JobFilter { kind: Some("bill.charge".into()), ..all.clone() })).await,
        vec![id[3], id[2]]
    );
    assert_eq!(ids(&db, &by(JobFilter { tag: Some("eu".into()), ..all.clone() })).await, vec![id[2], id[0]]);
    let states = vec![JobState::Running, JobState::Discarded];
    assert_eq!(ids(&db, &by(JobFilter { states, ..all.clone() })).await, vec![id[2], id[1]]);
    let window =
        JobFilter { from: Some(at(4) - chrono::Duration::minutes(1)), to: Some(at(2)), ..all.clone() };
    assert_eq!(ids(&db, &window).await, vec![id[2], id[1]], "from inclusive, to exclusive");
    let combined = JobFilter {
        queue: Some("mail".into()),
        states: vec![JobState::Available, JobState::Scheduled],
        ..all.clone()
    };
    assert_eq!(ids(&db, &combined).await, vec![id[4], id[0]]);
    assert!(ids(&db, &by(JobFilter { queue: Some("x' OR '1'='1".into()), ..all.clone() })).await.is_empty());
    // Text in errors: message or type, any case; `%` and `_` are characters, not wildcards.
    let error = |text: &str| JobFilter { error: Some(text.into()), ..all.clone() };
    assert_eq!(ids(&db, &error("connection reset")).await, vec![id[1]]);
    assert_eq!(ids(&db, &error("SMTP")).await, vec![id[1]]);
    assert_eq!(ids(&db, &error("100%_peer")).await, vec![id[1]]);
    assert!(ids(&db, &error("100%x")).await.is_empty());
    assert!(ids(&db, &error("1_0")).await.is_empty());
    assert_eq!(count(&db, &error("reset"), 10).await, Count::Exact(1));
    // A window of ids: at least `id_at_least`.
    let window = JobFilter { id_at_least: Some(id[2]), ..all.clone() };
    assert_eq!(ids(&db, &window).await, vec![id[4], id[3], id[2]]);

    // Keyset pages of two.
    let page = |before| JobListParams { filter: &all, before, limit: 2 };
    let first = db.driver.job_list(page(None)).await.expect("page 1");
    assert_eq!(first.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id[4], id[3]]);
    let second = db.driver.job_list(page(first.last().map(|j| j.id))).await.expect("page 2");
    assert_eq!(second.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id[2], id[1]]);
    let third = db.driver.job_list(page(second.last().map(|j| j.id))).await.expect("page 3");
    assert_eq!(third.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id[0]]);
    assert_eq!(first[0].kind, "mail.send");
    assert_eq!(first[0].state, JobState::Scheduled);
    // Oldest first: the same keyset, the other way.
    let oldest = JobFilter { order: JobOrder::OldestFirst, ..all.clone() };
    let page = |before| JobListParams { filter: &oldest, before, limit: 3 };
    let first = db.driver.job_list(page(None)).await.expect("oldest page 1");
    assert_eq!(first.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id[0], id[1], id[2]]);
    let second = db.driver.job_list(page(first.last().map(|j| j.id))).await.expect("oldest page 2");
    assert_eq!(second.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id[3], id[4]]);
    let ids_only = JobListParams { filter: &oldest, before: Some(id[1]), limit: 10 };
    assert_eq!(db.driver.job_list_ids(ids_only).await.expect("ids"), vec![id[2], id[3], id[4]]);

    assert_eq!(count(&db, &all, 100).await, Count::Exact(5));
    assert_eq!(
        count(&db, &JobFilter { queue: Some("mail".into()), ..all.clone() }, 100).await,
        Count::Exact(3)
    );
    // Past the cap: the planner's estimate where the driver has one, else "more than".
    let past = count(&db, &all, 3).await;
    if db.driver.capabilities().has(Capability::CountEstimates) {
        assert!(matches!(past, Count::Estimate(n) if n > 3), "{past:?}");
    } else {
        assert_eq!(past, Count::AtLeast(3));
    }

    // Queue depths: pending jobs per state and queue, with the pause flag.
    db.driver.queue_set_paused(QueueSetPausedParams { queue: "billing", paused: true }).await.expect("pause");
    let depths = db.driver.queue_list_depths(QueueListDepthsParams {}).await.expect("depths");
    let names: Vec<&str> = depths.iter().map(|d| d.queue.as_str()).collect();
    assert_eq!(names, ["billing", "mail"]);
    assert_eq!((depths[0].running, depths[0].available, depths[0].paused), (1, 0, true));
    assert_eq!((depths[1].available, depths[1].scheduled, depths[1].paused), (1, 1, false));
    assert!(depths[1].oldest_available_secs.is_some_and(|s| s >= 5.0 * 3600.0 - 60.0));

    // Cluster-wide concurrency: stored beside the pause flag, cleared back to none.
    let concurrency = |queue, concurrency| QueueSetConcurrencyParams { queue, concurrency };
    db.driver.queue_set_concurrency(concurrency("billing", Some(3))).await.expect("set billing");
    db.driver.queue_set_concurrency(concurrency("reports", Some(1))).await.expect("set a new queue");
    let all = db.driver.queue_settings(QueueSettingsParams { queue: None }).await.expect("settings");
    let seen: Vec<(&str, bool, Option<i64>)> =
        all.iter().map(|s| (s.queue.as_str(), s.paused, s.concurrency)).collect();
    assert_eq!(seen, [("billing", true, Some(3)), ("reports", false, Some(1))]);
    db.driver.queue_set_concurrency(concurrency("billing", None)).await.expect("clear");
    let billing =
        db.driver.queue_settings(QueueSettingsParams { queue: Some("billing") }).await.expect("one");
    assert_eq!(billing.len(), 1);
    assert_eq!((billing[0].paused, billing[0].concurrency), (true, None), "the pause flag is kept");
    assert!(
        db.driver.queue_settings(QueueSettingsParams { queue: Some("nope") }).await.expect("none").is_empty()
    );

    // Throughput: 60 minutes, the counters added up.
    let minute = Utc::now();
    let counts = [
        StatsCount { minute, queue: "mail", state: JobState::Completed, count: 3 },
        StatsCount { minute, queue: "billing", state: JobState::Completed, count: 2 },
        StatsCount { minute, queue: "mail", state: JobState::Discarded, count: 1 },
    ];
    db.driver.stats_record(StatsRecordParams { counts: &counts, kinds: &[] }).await.expect("record");
    db.driver
        .stats_record(StatsRecordParams { counts: &counts[..1], kinds: &[] })
        .await
        .expect("record again");
    let minutes = db.driver.stats_throughput(StatsThroughputParams::default()).await.expect("throughput");
    assert_eq!(minutes.len(), 60);
    assert!(minutes.windows(2).all(|w| w[1].minute - w[0].minute == chrono::Duration::minutes(1)));
    let sum = |f: fn(&jobs_core::driver::Throughput) -> i64| minutes.iter().map(f).sum::<i64>();
    assert_eq!((sum(|m| m.completed), sum(|m| m.discarded), sum(|m| m.retried)), (8, 1, 0));
    // A day in 15-minute buckets, with counters from 3 hours and 2 days ago: the first
    // counted, the second outside the window.
    // One `now` for the writes and the read, so no 15-minute boundary falls between them.
    let now = Utc::now();
    for (hours, n) in [(3, 4), (48, 100)] {
        let minute = now - chrono::Duration::hours(hours);
        let counts = [StatsCount { minute, queue: "mail", state: JobState::Completed, count: n }];
        db.driver.stats_record(StatsRecordParams { counts: &counts, kinds: &[] }).await.expect("record");
    }
    let day = StatsThroughputParams {
        window: std::time::Duration::from_secs(24 * 3600),
        step: std::time::Duration::from_secs(15 * 60),
        now: Some(now),
    };
    let buckets = db.driver.stats_throughput(day).await.expect("a day");
    assert_eq!(buckets.len(), 96);
    assert!(buckets.windows(2).all(|w| w[1].minute - w[0].minute == chrono::Duration::minutes(15)));
    assert_eq!(buckets.iter().map(|b| b.completed).sum::<i64>(), 8 + 4);
    let three_hours_ago = &buckets[96 - 1 - 12];
    assert_eq!(three_hours_ago.completed, 4, "{buckets:?}");

    // Per-kind counters: outcomes and histograms add up over the window, by kind.
    let kind = |kind, metric, idx, count, minutes_ago: i64| KindStatsCount {
        minute: Utc::now() - chrono::Duration::minutes(minutes_ago),
        kind,
        metric,
        idx,
        count,
    };
    let rows = [
        kind("mail.send", KindMetric::Completed, 0, 9, 0),
        kind("mail.send", KindMetric::Retried, 0, 1, 0),
        kind("mail.send", KindMetric::RunMs, 4, 8, 0),
        kind("mail.send", KindMetric::RunMs, 10, 2, 0),
        kind("mail.send", KindMetric::WaitMs, 0, 10, 0),
        kind("bill.charge", KindMetric::Discarded, 0, 2, 0),
        kind("mail.send", KindMetric::Completed, 0, 100, 3 * 60),
    ];
    for _ in 0..2 {
        let record = StatsRecordParams { counts: &[], kinds: &rows };
        db.driver.stats_record(record).await.expect("record kinds");
    }
    let hour = StatsKindsParams { window: std::time::Duration::from_secs(3600), now: None };
    let kinds = db.driver.stats_kinds(hour).await.expect("kinds");
    assert_eq!(kinds.iter().map(|k| k.kind.as_str()).collect::<Vec<_>>(), ["bill.charge", "mail.send"]);
    let mail = &kinds[1];
    assert_eq!(
        (mail.completed, mail.retried, mail.discarded),
        (18, 2, 0),
        "two writes add up; 3 h ago is out"
    );
    assert_eq!((mail.run.0[4], mail.run.0[10], mail.run.count()), (16, 4, 20));
    assert_eq!(mail.wait.count(), 20);
    assert_eq!(kinds[0].discarded, 4);
    let day = StatsKindsParams { window: std::time::Duration::from_secs(24 * 3600), now: None };
    assert_eq!(db.driver.stats_kinds(day).await.expect("a day")[1].completed, 218);
    // Rolling minutes older than a day up into hours keeps every total, and once done
    // leaves nothing more to roll up.
    let two_days_ago = Utc::now() - chrono::Duration::days(2);
    let hour = two_days_ago.duration_trunc(chrono::Duration::hours(1)).expect("an hour");
    let old_minutes: Vec<KindStatsCount> = (1..=3)
        .map(|m| KindStatsCount {
            minute: hour + chrono::Duration::minutes(m),
            kind: "mail.send",
            metric: KindMetric::RunMs,
            idx: 4,
            count: 5,
        })
        .collect();
    // Another queue than the counter written 48 h ago, which may fall on the same minute.
    let old_counts = [StatsCount {
        minute: hour + chrono::Duration::minutes(7),
        queue: "reports",
        state: JobState::Completed,
        count: 2,
    }];
    db.driver
        .stats_record(StatsRecordParams { counts: &old_counts, kinds: &old_minutes })
        .await
        .expect("old");
    let week = StatsKindsParams { window: std::time::Duration::from_secs(7 * 24 * 3600), now: None };
    let before = db.driver.stats_kinds(week).await.expect("a week");
    let last_hour = StatsKindsParams { window: std::time::Duration::from_secs(3600), now: None };
    let hour_of_kinds = db.driver.stats_kinds(last_hour).await.expect("an hour");
    // Per-queue minutes older than a day, per-kind ones older than two hours.
    let compact = StatsCompactParams {
        older_than: std::time::Duration::from_secs(24 * 3600),
        kinds_older_than: std::time::Duration::from_secs(2 * 3600),
        now: None,
    };
    // The three kind minutes, the queue minute, the counter written 48 h ago above and the
    // kind's minute of 3 h ago (each unless it fell on the hour, when it is already an
    // hour's row); not the queue's minute of 3 h ago.
    let on_the_hour = |t: chrono::DateTime<Utc>| chrono::Timelike::minute(&t) == 0;
    let expected = 3
        + 1
        + i64::from(!on_the_hour(now - chrono::Duration::hours(48)))
        + i64::from(!on_the_hour(rows[6].minute));
    assert_eq!(db.driver.stats_compact(compact).await.expect("compact"), expected, "minute rows rolled up");
    assert_eq!(db.driver.stats_kinds(week).await.expect("after"), before, "the same totals and histograms");
    assert_eq!(
        db.driver.stats_kinds(last_hour).await.expect("an hour after"),
        hour_of_kinds,
        "the last hour's minutes kept"
    );
    assert_eq!(db.driver.stats_compact(compact).await.expect("again"), 0);
    let week_of_counts = StatsThroughputParams {
        window: std::time::Duration::from_secs(7 * 24 * 3600),
        step: std::time::Duration::from_secs(2 * 3600),
        now: None,
    };
    let completed: i64 =
        db.driver.stats_throughput(week_of_counts).await.expect("week").iter().map(|b| b.completed).sum();
    assert_eq!(completed, 8 + 4 + 100 + 2, "every counter of the week, the rolled-up ones included");

    // Pruning takes them with the per-queue counters.
    let prune = StatsPruneParams { keep: std::time::Duration::from_secs(3600), now: None };
    assert!(db.driver.stats_prune(prune).await.expect("prune") >= 2);
    assert_eq!(db.driver.stats_kinds(day).await.expect("after pruning")[1].completed, 18);

    // Nodes, most recently seen first.
    let queues = json!({"work": {"limit": 10, "running": 2}});
    for (node, hours) in [("old", 2), ("new", 0)] {
        let beat = NodeHeartbeatParams {
            node,
            host: "h",
            pid: 7,
            queues: &queues,
            kinds: &[],
            kind_options: &serde_json::json!({}),
            now: Some(at(hours)),
            lock: None,
            registering: false,
        };
        db.driver.node_heartbeat(beat).await.expect("heartbeat");
    }
    let nodes = db.driver.node_list(NodeListParams {}).await.expect("nodes");
    assert_eq!(nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["new", "old"]);
    assert_eq!(nodes[0].queues, queues);

    // Time orders, a page of one at a time: due soonest among waiting jobs (ids break ties),
    // recently finished among finished ones.
    let later = |h: i64| now + chrono::Duration::hours(h);
    let waiting = insert_all(
        &*db.driver,
        vec![
            JobFactory::new("sorted").queue("sorted").state(JobState::Scheduled, later(3)),
            JobFactory::new("sorted").queue("sorted").state(JobState::Retryable, later(1)),
            JobFactory::new("sorted").queue("sorted").state(JobState::Scheduled, later(1)),
            JobFactory::new("sorted").queue("sorted").state(JobState::Completed, at(3)),
            JobFactory::new("sorted").queue("sorted").state(JobState::Discarded, at(1)),
            JobFactory::new("sorted").queue("sorted").state(JobState::Completed, at(2)),
        ],
    )
    .await;
    let walk = |order: JobOrder, states: Vec<JobState>| {
        let filter = JobFilter { order, states, queue: Some("sorted".into()), ..JobFilter::default() };
        let driver = db.driver.clone();
        async move {
            let mut seen = Vec::new();
            let mut before = None;
            loop {
                let page = JobListParams { filter: &filter, before, limit: 1 };
                let Some(job) = driver.job_list(page).await.expect("a page").into_iter().next() else {
                    break;
                };
                before = Some(job.id);
                seen.push(job.id);
            }
            seen
        }
    };
    let due = walk(JobOrder::DueSoonest, JobOrder::DUE_STATES.to_vec()).await;
    assert_eq!(due, [waiting[1], waiting[2], waiting[0]], "due soonest, ties by id");
    let finished = walk(JobOrder::RecentlyFinished, vec![JobState::Completed, JobState::Discarded]).await;
    assert_eq!(finished, [waiting[4], waiting[5], waiting[3]], "most recently finished first");
    // The cursor job deleted before the next page is asked for: the page goes on from its
    // id rather than coming back empty.
    let deleted = waiting[5];
    db.driver
        .job_delete_many(jobs_core::driver::JobDeleteManyParams { ids: &[deleted] })
        .await
        .expect("delete");
    let filter = JobFilter {
        order: JobOrder::RecentlyFinished,
        states: vec![JobState::Completed, JobState::Discarded],
        queue: Some("sorted".into()),
        ..JobFilter::default()
    };
    let after = db
        .driver
        .job_list(JobListParams { filter: &filter, before: Some(deleted), limit: 10 })
        .await
        .expect("a page");
    // (By id, its neighbour in time order may show again; the jobs after it are not lost.)
    assert!(after.iter().any(|j| j.id == waiting[3]), "{after:?}");
}

/// A JSON subset of the arguments or the metadata finds its jobs.
pub async fn search_finds_jobs_by_a_subset_of_their_arguments_or_metadata(db: TestDb) {
    let now = Utc::now();
    let id = insert_all(
        &*db.driver,
        vec![
            JobFactory::new("k").args(json!({"user_id": 7, "plan": "pro"})).state(JobState::Discarded, now),
            JobFactory::new("k")
                .args(json!({"user_id": 8}))
                .meta(json!({"request": "r-1"}))
                .state(JobState::Discarded, now),
            JobFactory::new("k").args(json!({"user_id": 7})).state(JobState::Completed, now),
        ],
    )
    .await;
    let search = |value: serde_json::Value, states: Vec<JobState>| JobFilter {
        search: Some(value),
        states,
        ..JobFilter::default()
    };
    assert_eq!(ids(&db, &search(json!({"user_id": 7}), vec![JobState::Discarded])).await, vec![id[0]]);
    assert_eq!(
        ids(&db, &search(json!({"user_id": 7}), vec![JobState::Discarded, JobState::Completed])).await,
        vec![id[2], id[0]]
    );
    assert_eq!(ids(&db, &search(json!({"request": "r-1"}), vec![JobState::Discarded])).await, vec![id[1]]);
    assert!(ids(&db, &search(json!({"user_id": 9}), vec![JobState::Discarded])).await.is_empty());
}

/// Past the cap, a count is the planner's estimate, at least the cap.
pub async fn counts_past_the_cap_are_estimated(db: TestDb) {
    let now = Utc::now();
    insert_all(&*db.driver, (0..50).map(|_| JobFactory::new("k").state(JobState::Completed, now)).collect())
        .await;
    match count(&db, &JobFilter::default(), 10).await {
        Count::Estimate(n) => assert!(n > 10, "estimate {n}"),
        other => panic!("expected an estimate, got {other:?}"),
    }
}
