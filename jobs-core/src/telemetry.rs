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
//!   fit: `messaging.system` (`jobs`), `messaging.operation.type` (`send`, `process`),
//!   `messaging.destination.name` (the queue), `messaging.message.id` (the job's id) and
//!   `messaging.batch.message_count`.
//!
//! The spans are `tracing` spans: they reach an OpenTelemetry exporter through
//! `tracing-opentelemetry`'s layer, which the application installs with its tracer
//! provider (without one, nothing is stored and nothing is exported).

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use jobs_driver::{ClaimedJob, NewJob};

/// The metadata key of the W3C `traceparent`.
pub const TRACEPARENT: &str = "traceparent";
/// The metadata key of the W3C `tracestate`.
pub const TRACESTATE: &str = "tracestate";

/// The `jobs.enqueue` span of an insert of `jobs` (not entered: it ends when dropped).
pub(crate) fn enqueue_span<'j>(jobs: impl IntoIterator<Item = &'j NewJob>) -> Span {
    let mut jobs = jobs.into_iter();
    let queue = jobs.next().map(|job| job.queue.to_string()).unwrap_or_default();
    let count = 1 + jobs.count();
    tracing::info_span!(
        "jobs.enqueue",
        otel.name = %format!("send {queue}"),
        otel.kind = "producer",
        messaging.system = "jobs",
        messaging.operation.type = "send",
        messaging.destination.name = %queue,
        messaging.batch.message_count = count,
    )
}

/// Stores `span`'s trace context in `job`'s metadata, unless the job carries one already
/// or there is none (no OpenTelemetry layer, or a span it does not record).
pub(crate) fn inject(span: &Span, job: &mut NewJob) -> Result<(), serde_json::Error> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    if !span_context.is_valid() || job.meta_value(TRACEPARENT).is_some() {
        return Ok(());
    }
    job.set_meta(TRACEPARENT, traceparent(&span_context))?;
    let state = span_context.trace_state().header();
    if !state.is_empty() {
        job.set_meta(TRACESTATE, state)?;
    }
    Ok(())
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
    if let Some(parent) = remote_context(&job.meta) {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
    }
    span
}

/// `00-<trace id>-<span id>-<flags>`.
fn traceparent(context: &SpanContext) -> String {
    format!("00-{}-{}-{:02x}", context.trace_id(), context.span_id(), context.trace_flags().to_u8())
}

/// The remote span context the metadata's `traceparent` (and `tracestate`) say, if they
/// are there and well formed.
fn remote_context(meta: &str) -> Option<SpanContext> {
    let meta: serde_json::Map<String, serde_json::Value> = serde_json::from_str(meta).ok()?;
    let parent = meta.get(TRACEPARENT)?.as_str()?;
    let mut parts = parent.split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
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
    }

    #[test]
    fn malformed_or_missing_traceparents_are_ignored() {
        for meta in [
            "{}".to_owned(),
            "not json".to_owned(),
            serde_json::json!({ TRACEPARENT: 7 }).to_string(),
            serde_json::json!({ TRACEPARENT: "00-abc-def-01" }).to_string(),
            serde_json::json!({ TRACEPARENT: "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" })
                .to_string(),
            serde_json::json!({ TRACEPARENT: "00-00000000000000000000000000000000-00f067aa0ba902b7-01" })
                .to_string(),
        ] {
            assert!(remote_context(&meta).is_none(), "{meta}");
        }
    }
}
