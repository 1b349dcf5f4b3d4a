//! The overview's throughput chart: outcomes over the last hour, day or week, from the
//! per-minute counters (`stats_throughput`), as an SVG with axes, ticks and a legend.
//! Stacked per bucket: completed, failed attempts that were retried, and jobs discarded
//! or cancelled.

use std::time::Duration;

use jobs_core::driver::{StatsThroughputParams, Throughput};

use crate::error::DashboardError;

/// Which window the chart shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    /// 60 one-minute bars.
    Hour,
    /// 96 fifteen-minute bars.
    Day,
    /// 84 two-hour bars.
    Week,
}

impl Window {
    /// Every window, in the order the page offers them.
    pub(crate) const ALL: [Window; 3] = [Window::Hour, Window::Day, Window::Week];

    /// From the `chart` parameter (`hour` when absent).
    pub(crate) fn parse(value: Option<&str>) -> Result<Window, DashboardError> {
        match value {
            None | Some("hour") => Ok(Window::Hour),
            Some("day") => Ok(Window::Day),
            Some("week") => Ok(Window::Week),
            Some(other) => {
                Err(DashboardError::BadRequest(format!("`chart` is hour, day or week, not `{other}`")))
            }
        }
    }

    /// Its parameter value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Window::Hour => "hour",
            Window::Day => "day",
            Window::Week => "week",
        }
    }

    /// What the driver is asked for.
    pub(crate) fn params(self) -> StatsThroughputParams {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        let (window, step) = match self {
            Window::Hour => (minutes(60), minutes(1)),
            Window::Day => (minutes(24 * 60), minutes(15)),
            Window::Week => (minutes(7 * 24 * 60), minutes(120)),
        };
        StatsThroughputParams { window, step, now: None }
    }

    fn tick_format(self) -> &'static str {
        match self {
            Window::Hour | Window::Day => "%H:%M",
            Window::Week => "%a %d",
        }
    }

    fn bucket_label(self) -> &'static str {
        match self {
            Window::Hour => "minute",
            Window::Day => "15 minutes",
            Window::Week => "2 hours",
        }
    }
}

/// The plot area inside the SVG's 960 × 220 view box.
const LEFT: f64 = 52.0;
const RIGHT: f64 = 952.0;
const TOP: f64 = 8.0;
const BOTTOM: f64 = 196.0;

/// One stacked bar.
pub(crate) struct Bar {
    pub(crate) x: f64,
    pub(crate) width: f64,
    /// (y, height) of each segment: completed, retried, discarded or cancelled.
    pub(crate) segments: [(f64, f64); 3],
    pub(crate) title: String,
}

/// A labelled tick.
pub(crate) struct Tick {
    pub(crate) at: f64,
    pub(crate) label: String,
}

/// Everything the template draws.
pub(crate) struct Chart {
    pub(crate) window: Window,
    pub(crate) bars: Vec<Bar>,
    pub(crate) y_ticks: Vec<Tick>,
    pub(crate) x_ticks: Vec<Tick>,
    pub(crate) completed: i64,
    pub(crate) retried: i64,
    pub(crate) failed: i64,
    pub(crate) per: &'static str,
}

impl Chart {
    /// The plot's corners, for the axes.
    pub(crate) fn left(&self) -> f64 {
        LEFT
    }
    pub(crate) fn right(&self) -> f64 {
        RIGHT
    }
    pub(crate) fn top(&self) -> f64 {
        TOP
    }
    pub(crate) fn bottom(&self) -> f64 {
        BOTTOM
    }
}

/// The smallest 1, 2 or 5 × 10ⁿ at least `n` (at least 1): the axis's top.
fn nice_ceiling(n: i64) -> i64 {
    let mut unit = 1_i64;
    loop {
        for m in [1, 2, 5] {
            let candidate = unit.saturating_mul(m);
            if candidate >= n || candidate == i64::MAX {
                return candidate.max(1);
            }
        }
        unit = unit.saturating_mul(10);
    }
}

/// The chart of `buckets` (oldest first) for `window`.
pub(crate) fn chart(window: Window, buckets: &[Throughput]) -> Chart {
    let total = |b: &Throughput| b.completed + b.retried + b.discarded + b.cancelled;
    let top = nice_ceiling(buckets.iter().map(total).max().unwrap_or(0));
    let height = BOTTOM - TOP;
    let slot = (RIGHT - LEFT) / buckets.len().max(1) as f64;
    let scale = |n: i64| n as f64 / top as f64 * height;
    let bars = buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let parts = [b.completed, b.retried, b.discarded + b.cancelled];
            let mut y = BOTTOM;
            let segments = parts.map(|n| {
                let h = scale(n);
                y -= h;
                (y, h)
            });
            Bar {
                x: LEFT + i as f64 * slot + slot * 0.1,
                width: slot * 0.8,
                segments,
                title: format!(
                    "{}: {} completed, {} failed attempts retried, {} discarded, {} cancelled",
                    b.minute.format("%a %d %b %H:%M UTC"),
                    crate::view::thousands(b.completed),
                    crate::view::thousands(b.retried),
                    crate::view::thousands(b.discarded),
                    crate::view::thousands(b.cancelled)
                ),
            }
        })
        .collect();
    let y_ticks = [0, top / 2, top]
        .into_iter()
        .map(|v| Tick { at: BOTTOM - scale(v), label: crate::view::thousands(v) })
        .collect();
    let n = buckets.len();
    let x_ticks = (0..=4)
        .filter_map(|k| {
            let i = (n.saturating_sub(1)) * k / 4;
            buckets.get(i).map(|b| Tick {
                at: LEFT + (i as f64 + 0.5) * slot,
                label: b.minute.format(window.tick_format()).to_string(),
            })
        })
        .collect();
    Chart {
        window,
        bars,
        y_ticks,
        x_ticks,
        completed: buckets.iter().map(|b| b.completed).sum(),
        retried: buckets.iter().map(|b| b.retried).sum(),
        failed: buckets.iter().map(|b| b.discarded + b.cancelled).sum(),
        per: window.bucket_label(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(completed: i64, retried: i64) -> Throughput {
        Throughput { minute: chrono::Utc::now(), completed, retried, discarded: 1, cancelled: 1 }
    }

    #[test]
    fn no_bar_is_taller_than_the_plot_when_retries_dominate() {
        // The tallest bucket is made mostly of retried attempts (the old chart overflowed
        // because its scale left them out).
        let c = chart(Window::Hour, &[bucket(10, 0), bucket(5, 400), bucket(0, 0)]);
        for bar in &c.bars {
            let top = bar.segments[2].0;
            assert!(top >= TOP - 1e-9, "a bar rises to {top}, above the plot's top {TOP}");
            let height: f64 = bar.segments.iter().map(|s| s.1).sum();
            assert!((BOTTOM - top - height).abs() < 1e-9, "segments stack");
        }
        assert_eq!(c.y_ticks.last().map(|t| t.label.as_str()), Some("500"), "407 rounds up to 500");
        assert_eq!((c.completed, c.retried, c.failed), (15, 400, 6));
    }

    #[test]
    fn axis_tops_are_round() {
        assert_eq!([0, 1, 3, 7, 10, 11, 4_100].map(nice_ceiling), [1, 1, 5, 10, 10, 20, 5_000]);
    }

    #[test]
    fn windows_parse_and_ask_for_their_buckets() {
        assert_eq!(Window::parse(None).ok(), Some(Window::Hour));
        assert!(Window::parse(Some("year")).is_err());
        assert_eq!(Window::ALL.map(|w| w.params().buckets()), [60, 96, 84]);
    }
}
