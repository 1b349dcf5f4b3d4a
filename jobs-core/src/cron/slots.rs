//! When a cron expression fires, in a time zone, across daylight-saving changes.
//!
//! Slots are computed on the zone's wall clock, then mapped to instants:
//! - a wall-clock time that does not exist (clocks jump forward) fires at the instant it
//!   would have been before the jump (02:30 on a night that skips 02:00–03:00 fires at
//!   03:30 new time), so a daily job still runs that day, once;
//! - a wall-clock time that happens twice (clocks fall back) fires once, at the first
//!   occurrence — unless the expression's hour field is a wildcard (`*`, `*/n`), whose
//!   jobs run by the real clock and so fire at both.

use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

/// A parsed schedule: expression and zone.
#[derive(Debug, Clone)]
pub struct CronExpr {
    schedule: cron::Schedule,
    expression: String,
    tz: Tz,
    every_hour: bool,
}

/// Accepts standard five-field cron (minute first), six or seven fields with seconds
/// first, and `@hourly`-style shorthands; returns the form the `cron` crate parses.
pub fn normalize(expression: &str) -> String {
    let trimmed = expression.trim();
    if trimmed.starts_with('@') || trimmed.split_whitespace().count() != 5 {
        trimmed.to_owned()
    } else {
        format!("0 {trimmed}")
    }
}

impl CronExpr {
    /// Parses `expression` in zone `timezone` (an IANA name such as `Europe/Paris`).
    pub fn parse(expression: &str, timezone: &str) -> Result<CronExpr, String> {
        let expression = normalize(expression);
        let schedule = cron::Schedule::from_str(&expression)
            .map_err(|e| format!("invalid cron expression `{expression}`: {e}"))?;
        let tz = Tz::from_str(timezone).map_err(|_| {
            format!("unknown time zone `{timezone}`; use an IANA name such as \"Europe/Paris\"")
        })?;
        let every_hour = match expression.as_str() {
            "@hourly" => true,
            e if e.starts_with('@') => false,
            e => e.split_whitespace().nth(2).is_some_and(|hour| hour.starts_with('*')),
        };
        Ok(CronExpr { schedule, expression, tz, every_hour })
    }

    /// The normalized expression.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone.
    pub fn timezone(&self) -> Tz {
        self.tz
    }

    fn instants(&self, wall: NaiveDateTime, out: &mut Vec<DateTime<Utc>>) {
        match self.tz.from_local_datetime(&wall) {
            LocalResult::Single(t) => out.push(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(first, second) => {
                out.push(first.with_timezone(&Utc));
                if self.every_hour {
                    out.push(second.with_timezone(&Utc));
                }
            }
            LocalResult::None => {
                // In a forward jump: use the offset in force before it.
                let before = self.tz.from_local_datetime(&(wall - chrono::Duration::hours(3))).earliest();
                if let Some(before) = before {
                    let offset = i64::from(before.offset().fix().local_minus_utc());
                    out.push(Utc.from_utc_datetime(&(wall - chrono::Duration::seconds(offset))));
                }
            }
        }
    }

    /// The first slot strictly after `t`, if the expression ever fires again.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = t.with_timezone(&self.tz).naive_local();
        // Start a little before, so slots whose wall time repeats or was skipped are seen.
        let from = Utc.from_utc_datetime(&(local - chrono::Duration::hours(3)));
        let horizon = local + chrono::Duration::hours(3);
        let give_up = local + chrono::Duration::days(5 * 366);
        let mut best: Option<DateTime<Utc>> = None;
        let mut instants = Vec::with_capacity(2);
        for wall in self.schedule.after(&from).map(|d| d.naive_utc()) {
            instants.clear();
            self.instants(wall, &mut instants);
            for &instant in &instants {
                if instant > t && best.is_none_or(|b| instant < b) {
                    best = Some(instant);
                }
            }
            if (wall > horizon && best.is_some()) || wall > give_up {
                break;
            }
        }
        best
    }

    /// The latest slot at or before `now`, searching forward from `from` (inclusive), and
    /// how many slots lie in `[from, now]`. Bounded: counts at most `cap` slots.
    pub fn latest_due(
        &self,
        from: DateTime<Utc>,
        now: DateTime<Utc>,
        cap: usize,
    ) -> (Option<DateTime<Utc>>, usize) {
        if from > now {
            return (None, 0);
        }
        let mut latest = Some(from);
        let mut count = 1;
        let mut cursor = from;
        while count < cap {
            match self.next_after(cursor) {
                Some(next) if next <= now => {
                    latest = Some(next);
                    cursor = next;
                    count += 1;
                }
                _ => break,
            }
        }
        (latest, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paris(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        chrono_tz::Europe::Paris
            .with_ymd_and_hms(y, m, d, h, min, 0)
            .earliest()
            .expect("valid")
            .with_timezone(&Utc)
    }

    fn day_of_slots(e: &CronExpr, start: DateTime<Utc>, hours: i64) -> Vec<DateTime<Utc>> {
        let end = start + chrono::Duration::hours(hours);
        let mut out = Vec::new();
        let mut t = start;
        while let Some(next) = e.next_after(t) {
            if next > end {
                break;
            }
            out.push(next);
            t = next;
        }
        out
    }

    #[test]
    fn a_daily_job_runs_once_on_both_dst_change_days() {
        let e = CronExpr::parse("30 2 * * *", "Europe/Paris").expect("parse");
        // Spring forward, 2026-03-29: 02:30 does not exist; it runs at 03:30 CEST (01:30 UTC).
        let spring = day_of_slots(&e, paris(2026, 3, 28, 12, 0), 48);
        assert_eq!(spring.len(), 2, "{spring:?}");
        assert_eq!(spring[0], Utc.with_ymd_and_hms(2026, 3, 29, 1, 30, 0).single().expect("utc"));
        // Fall back, 2026-10-25: 02:30 happens twice; it runs at the first one only.
        let autumn = day_of_slots(&e, paris(2026, 10, 24, 12, 0), 48);
        assert_eq!(autumn.len(), 2, "{autumn:?}");
        assert_eq!(autumn[0], Utc.with_ymd_and_hms(2026, 10, 25, 0, 30, 0).single().expect("utc"));
    }

    #[test]
    fn an_hourly_job_follows_the_real_clock() {
        let e = CronExpr::parse("0 * * * *", "Europe/Paris").expect("parse");
        // 23 real hours on the spring day, 25 on the autumn day: one slot per real hour.
        let spring = day_of_slots(&e, paris(2026, 3, 29, 0, 0) - chrono::Duration::seconds(1), 23);
        assert_eq!(spring.len(), 23);
        let autumn = day_of_slots(&e, paris(2026, 10, 25, 0, 0) - chrono::Duration::seconds(1), 25);
        assert_eq!(autumn.len(), 25);
        assert!(autumn.windows(2).all(|w| w[1] - w[0] == chrono::Duration::hours(1)));
    }

    #[test]
    fn five_six_and_shorthand_forms_parse_and_bad_ones_explain() {
        assert_eq!(normalize("*/5 * * * *"), "0 */5 * * * *");
        assert_eq!(normalize("0 */5 * * * *"), "0 */5 * * * *");
        assert!(CronExpr::parse("@daily", "UTC").is_ok());
        let err = CronExpr::parse("61 * * * *", "UTC").expect_err("bad minute");
        assert!(err.contains("invalid cron expression"), "{err}");
        let err = CronExpr::parse("* * * * *", "Mars/Olympus").expect_err("bad zone");
        assert!(err.contains("unknown time zone `Mars/Olympus`"), "{err}");
    }
}
