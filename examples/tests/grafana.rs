//! The Grafana dashboard beside the examples (`examples/grafana/jobs.json`, import it in
//! Grafana with a Prometheus data source) charts every metric the engine records, by the
//! names and labels `jobs_core::metrics::ALL` gives, and nothing else.

use jobs_core::metrics::{ALL, MetricKind};

/// Every query of the dashboard's panels.
fn queries(dashboard: &serde_json::Value) -> Vec<String> {
    let panels = dashboard["panels"].as_array().expect("panels");
    panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_owned))
        .collect()
}

/// The `jobs_…` names a query reads.
fn names(query: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = query;
    while let Some(at) = rest.find("jobs_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(tail.len());
        found.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    found
}

#[test]
fn the_grafana_dashboard_charts_every_metric_and_only_those() {
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../grafana/jobs.json")).expect("the dashboard is JSON");
    let queries = queries(&dashboard);
    assert!(queries.len() >= 6, "{queries:#?}");
    let mut used = Vec::new();
    for query in &queries {
        for name in names(query) {
            let metric = ALL.iter().find(|m| m.name == name);
            let metric = metric
                .unwrap_or_else(|| panic!("`{name}` in `{query}` is no metric of jobs_core::metrics::ALL"));
            // Histograms are read as the exporter's default summaries (a quantile label).
            assert_eq!(
                metric.kind == MetricKind::Histogram,
                query.contains(&format!("{name}{{")) && query.contains("quantile="),
                "`{name}` in `{query}`: a histogram by its quantiles, a counter by its rate"
            );
            for label in ["queue", "kind"] {
                let grouped =
                    query.contains(&format!("by ({label})")) || query.contains(&format!("{{{{{label}}}}}"));
                assert!(
                    !grouped || metric.labels.contains(&label),
                    "`{name}` has no label `{label}`: `{query}`"
                );
            }
            used.push(name);
        }
    }
    for metric in ALL {
        assert!(used.iter().any(|u| u == metric.name), "the dashboard charts no `{}`", metric.name);
    }
}

#[test]
fn names_are_read_from_a_query() {
    assert_eq!(
        names("sum(rate(jobs_completed_total{queue=~\"$q\"}[5m])) / sum(rate(jobs_failed_total[5m]))"),
        ["jobs_completed_total", "jobs_failed_total"]
    );
}
