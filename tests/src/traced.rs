//! OpenTelemetry across processes: the job the trace test enqueues, a tracer provider that
//! keeps finished spans in memory, and the spans as lines of JSON that one process prints
//! and another reads.

use std::collections::BTreeMap;

use jobs_core::{JobContext, job};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde::{Deserialize, Serialize};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Arguments of [`traced_hello`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    /// Who to greet.
    pub name: String,
}

/// Greets, inside a span of its own (which must join the enqueuing trace too).
#[job(kind = "traced.hello", queue = "traced")]
pub async fn traced_hello(_ctx: JobContext, args: Hello) -> Result<String, std::io::Error> {
    let _greeting = tracing::info_span!("compose greeting").entered();
    Ok(format!("hello, {}", args.name))
}

/// This process's spans, kept in memory: install once, as the process's subscriber.
pub struct Spans {
    provider: SdkTracerProvider,
    exporter: InMemorySpanExporter,
}

impl Spans {
    /// Installs `tracing` with an OpenTelemetry layer whose spans end in memory.
    pub fn install(service: &'static str) -> Spans {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer(service));
        tracing_subscriber::registry().with(layer).init();
        Spans { provider, exporter }
    }

    /// Every span that ended so far.
    pub fn finished(&self) -> Vec<SpanRecord> {
        let _ = self.provider.force_flush();
        let spans = self.exporter.get_finished_spans().unwrap_or_default();
        spans
            .into_iter()
            .map(|span| SpanRecord {
                name: span.name.to_string(),
                trace_id: span.span_context.trace_id().to_string(),
                span_id: span.span_context.span_id().to_string(),
                parent_span_id: span.parent_span_id.to_string(),
                kind: format!("{:?}", span.span_kind),
                attributes: span
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                    .collect(),
            })
            .collect()
    }
}

/// One finished span, as the trace test compares them across processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanRecord {
    /// Its name (`otel.name` when the span set one).
    pub name: String,
    /// Its trace, in hex.
    pub trace_id: String,
    /// Its id, in hex.
    pub span_id: String,
    /// Its parent's id, in hex (zeros for a root).
    pub parent_span_id: String,
    /// `Server`, `Producer`, `Consumer`, `Internal`, ...
    pub kind: String,
    /// Its attributes, as text.
    pub attributes: BTreeMap<String, String>,
}
