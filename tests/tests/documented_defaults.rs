//! The guide's table of settings (`docs/guide.md`, "Every setting") says what the code
//! does: each maintenance default it lists is read from the table and compared with the
//! configuration's `Default`. (The guide once said 10 s where the code said 8 s.)

use std::collections::HashMap;
use std::time::Duration;

use jobs_core::maintenance::{
    ArchiverConfig, CronConfig, LeaderConfig, PrunerConfig, RescuerConfig, SchedulerConfig, SettlerConfig,
};

/// The table's rows: setting (without backticks) → default, as written.
fn documented() -> HashMap<String, String> {
    let guide = include_str!("../../docs/guide.md");
    let table = guide.split("### Every setting").nth(1).expect("the guide's settings table");
    table
        .lines()
        .skip_while(|l| !l.starts_with("| setting"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            Some((cells.get(1)?.replace('`', ""), (*cells.get(2)?).to_owned()))
        })
        .collect()
}

/// A duration as the guide writes it: `2 ms`, `1.5 s`, `60 s`, `5 min`, `1 day`, `7 days`.
fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        return format!("{ms} ms");
    }
    let secs = d.as_secs();
    if !ms.is_multiple_of(1_000) {
        return format!("{} s", d.as_secs_f64());
    }
    match secs {
        s if s <= 60 => format!("{s} s"),
        s if s % 86_400 == 0 && s / 86_400 == 1 => "1 day".to_owned(),
        s if s % 86_400 == 0 => format!("{} days", s / 86_400),
        s if s % 3_600 == 0 => format!("{} h", s / 3_600),
        s if s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// A count as the guide writes it: `5,000`.
fn count(n: i64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_guides_settings_table_says_what_the_code_does() {
    let table = documented();
    let (leader, rescuer, scheduler) =
        (LeaderConfig::default(), RescuerConfig::default(), SchedulerConfig::default());
    let (pruner, archiver, cron) =
        (PrunerConfig::default(), ArchiverConfig::default(), CronConfig::default());
    let kept = |d: Option<Duration>| d.map_or("kept".to_owned(), human);
    let expected = [
        ("LeaderConfig::interval", human(leader.interval)),
        ("LeaderConfig::holder_stale_after", human(leader.holder_stale_after)),
        ("LeaderConfig::lock_lost_grace", human(leader.lock_lost_grace)),
        ("LeaderConfig::ttl", human(leader.ttl)),
        ("RescuerConfig::interval", human(rescuer.interval)),
        ("RescuerConfig::node_stale_after", human(rescuer.node_stale_after)),
        ("RescuerConfig::lock_lost_grace", human(rescuer.lock_lost_grace)),
        ("RescuerConfig::max_node_losses", rescuer.max_node_losses.to_string()),
        ("RescuerConfig::forget_nodes_after", human(rescuer.forget_nodes_after)),
        ("RescuerConfig::timeout_grace", human(rescuer.timeout_grace)),
        (
            "SchedulerConfig::interval / batch",
            format!("{} / {}", human(scheduler.interval), count(scheduler.batch)),
        ),
        (
            "PrunerConfig::completed / cancelled / discarded",
            format!("{} / {} / {}", kept(pruner.completed), kept(pruner.cancelled), kept(pruner.discarded)),
        ),
        (
            "PrunerConfig::interval / batch",
            format!("{} / {} rows", human(pruner.interval), count(pruner.batch)),
        ),
        (
            "PrunerConfig::stats / stats_hourly_after / kind_stats_hourly_after",
            format!(
                "{} / {} / {}",
                human(pruner.stats),
                human(pruner.stats_hourly_after),
                human(pruner.kind_stats_hourly_after)
            ),
        ),
        (
            "ArchiverConfig::interval / batch",
            format!("{} / {} rows", human(archiver.interval), count(archiver.batch)),
        ),
        (
            "SettlerConfig::interval / batch",
            format!(
                "{} / {} jobs",
                human(SettlerConfig::default().interval),
                count(SettlerConfig::default().batch)
            ),
        ),
        ("CronConfig::interval / grace", format!("{} / {}", human(cron.interval), human(cron.grace))),
    ];
    let mut wrong = Vec::new();
    for (setting, code) in &expected {
        let Some(written) = table.get(*setting) else {
            wrong.push(format!("{setting}: not in the table"));
            continue;
        };
        // The default, before any explanation in parentheses.
        let written = written.split(" (").next().unwrap_or_default();
        if written != code {
            wrong.push(format!("{setting}: the guide says `{written}`, the code `{code}`"));
        }
    }
    assert!(wrong.is_empty(), "docs/guide.md disagrees with the code:\n{}", wrong.join("\n"));
}
