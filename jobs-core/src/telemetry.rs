//! OpenTelemetry (feature `opentelemetry`): a job's run continues the trace that enqueued
//! it, across processes, through the W3C trace context stored in the job's metadata.
//!
//! - Each enqueue opens a `jobs.enqueue` span (kind *producer*), a child of the span
//!   current at the call (a web request's, say), and stores its context in every job it
//!   inserts: metadata `traceparent` (and `tracestate` when there is one), as the W3C Trace
//!   Context header says them. A job that already carries a `traceparent` keeps it.
//! - Each run's `job` span (kind *consumer*) is a child of that context: the run, and every
//!   span its handler opens, join the enqueuing trace, on whichever node runs it. A retry's
//!   run is another child of the same enqueue.
//! - Both spans carry the messaging attributes of OpenTelemetry's semantic conventions that
//!   fit: `messaging.system` (`jobs`), `messaging.operation.type` (`send`, `process`) and
//!   `messaging.destination.name` (the queue, or `several`); the enqueue's
//!   `messaging.batch.message_count`, and `otel.status_code` `ERROR` when its insert failed;
//!   the run's `messaging.message.id` (the job's id).
//!
//! The spans are `tracing` spans: they reach an OpenTelemetry exporter through
//! `tracing-opentelemetry`'s layer, which the application installs with its tracer
//! provider (without one, nothing is stored and nothing is exported). The layer must be
//! the version this crate links (`tracing-opentelemetry` 0.34 over `opentelemetry` 0.33,
//! re-exported here as [`tracing_opentelemetry`] and [`opentelemetry`]): another version's
//! layer does not see these spans' contexts, and no trace context is stored.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use jobs_driver::{ClaimedJob, NewJob};

pub use opentelemetry;
pub use tracing_opentelemetry;

/// The metadata key of the W3C `traceparent`.
pub const TRACEPARENT: &str = "traceparent";
/// The metadata key of the W3C `tracestate`.
pub const TRACESTATE: &str = "tracestate";

/// The `jobs.enqueue` span of an insert of `jobs` (entered around the insert's statements,
/// it ends when dropped): named for the queue of its jobs, or `several` when they go to
/// more than one.
pub(crate) fn enqueue_span(jobs: &[&mut NewJob]) -> Span {
    let first = jobs.first().map(|job| job.queue.as_ref()).unwrap_or_default();
    let queue = if jobs.iter().all(|job| job.queue == first) { first } else { "several" };
    tracing::info_span!(
        "jobs.enqueue",
        otel.name = %format!("send {queue}"),
        otel.kind = "producer",
        otel.status_code = tracing::field::Empty,
        messaging.system = "jobs",
        messaging.operation.type = "send",
        messaging.destination.name = %queue,
        messaging.batch.message_count = jobs.len(),
    )
}

/// Marks `span` as failed (the insert it covers failed).
pub(crate) fn failed(span: &Span) {
    span.record("otel.status_code", "ERROR");
}

/// The W3C headers of `span`'s context (`traceparent`, and `tracestate` when not empty),
/// when it has one (there is an OpenTelemetry layer and it records the span).
pub(crate) fn headers(span: &Span) -> Option<(String, Option<String>)> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let span_context = context.span().span_context().clone();
    if !span_context.is_valid() {
        return None;
    }
    let state = span_context.trace_state().header();
    Some((traceparent(&span_context), (!state.is_empty()).then_some(state)))
}

/// Stores `headers` in `job`'s metadata, unless the job carries a `traceparent` already or
/// its metadata is not an object (left as it is, for the insert's own check).
pub(crate) fn inject(headers: &(String, Option<String>), job: &mut NewJob) {
    let Ok(mut meta) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&job.meta) else {
        return;
    };
    if meta.contains_key(TRACEPARENT) {
        return;
    }
    meta.insert(TRACEPARENT.to_owned(), headers.0.clone().into());
    if let Some(state) = &headers.1 {
        meta.insert(TRACESTATE.to_owned(), state.clone().into());
    }
    if let Ok(text) = serde_json::to_string(&meta) {
        job.meta = text.into();
    }
}

/// The `job` span of a run, a child of the trace context its metadata carries.
pub(crate) fn job_span(job: &ClaimedJob) -> Span {
    let span = tracing::info_span!(
        "job",
        job.id = job.id,
        job.kind = %job.kind,
        job.attempt = job.attempt,
        job.queue = %job.queue,
        otel.name = %format!("process {}", job.queue),
        otel.kind = "consumer",
        messaging.system = "jobs",
        messaging.operation.type = "process",
        messaging.destination.name = %job.queue,
        messaging.message.id = job.id,
    );
    if !span.is_disabled()
        && job.meta.contains(TRACEPARENT)
        && let Some(parent) = remote_context(&job.meta)
    {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    }
    span
}

/// `00-<trace id>-<span id>-<flags>`.
fn traceparent(context: &SpanContext) -> String {
    format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8())
}

/// Whether `text` is `len` lowercase hexadecimal digits.
fn lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The remote span context the metadata's `traceparent` (and `tracestate`) say, if they
/// are there and well formed as W3C Trace Context says: version `00` has exactly four
/// fields, a later version at least four (read as `00`'s), `ff` is invalid, ids are lower
/// case and not all zeros; of the flags, only `sampled` is kept.
fn remote_context(meta: &str) -> Option<SpanContext> {
    let meta: serde_json::Map<String, serde_json::Value> = serde_json::from_str(meta).ok()?;
    let parent = meta.get(TRACEPARENT)?.as_str()?;
    let parts: Vec<&str> = parent.split('-').collect();
    let [version, trace, span, flags, rest @ ..] = parts.as_slice() else { return None };
    if !lower_hex(version, 2) || *version == "ff" || (*version == "00" && !rest.is_empty()) {
        return None;
    }
    if !lower_hex(trace, 32) || !lower_hex(span, 16) || !lower_hex(flags, 2) {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()? & TraceFlags::SAMPLED.to_u8());
    let state = meta
        .get(TRACESTATE)
        .and_then(|s| s.as_str())
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let context = SpanContext::new(trace, span, flags, true, state);
    context.is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_back_as_written() {
        let trace = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex");
        let span = SpanId::from_hex("00f067aa0ba902b7").expect("hex");
        let written = SpanContext::new(trace, span, TraceFlags::SAMPLED, false, TraceState::default());
        let header = traceparent(&written);
        assert_eq!(header, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let meta = serde_json::json!({ TRACEPARENT: header, TRACESTATE: "vendor=value" }).to_string();
        let read = remote_context(&meta).expect("a context");
        assert_eq!((read.trace_id(), read.span_id(), read.trace_flags()), (trace, span, TraceFlags::SAMPLED));
        assert!(read.is_remote());
        assert_eq!(read.trace_state().header(), "vendor=value");
        // A later version may add fields; unknown flags are dropped.
        let later = serde_json::json!({ TRACEPARENT: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-more" });
        let read = remote_context(&later.to_string()).expect("a context");
        assert_eq!((read.trace_id(), read.trace_flags()), (trace, TraceFlags::SAMPLED));
    }

    #[test]
    fn malformed_or_missing_traceparents_are_ignored() {
        let headers = [
            "00-abc-def-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-+1",
        ];
        let written = headers.iter().map(|h| serde_json::json!({ TRACEPARENT: h }).to_string());
        let others =
            ["{}".to_owned(), "not json".to_owned(), serde_json::json!({ TRACEPARENT: 7 }).to_string()];
        for meta in written.chain(others) {
            assert!(remote_context(&meta).is_none(), "{meta}");
        }
    }
}
