//! OpenTelemetry on, to measure what it costs: with the `otel` feature and
//! `JOBS_BENCH_OTEL=1`, the benchmark and its worker processes install
//! `tracing-opentelemetry`'s layer (spans at `info` and up, every trace sampled) over a
//! batch exporter that drops what it is given. Each enqueue then opens its span and stores
//! its trace context in its jobs, and each run opens its span as that context's child.

use crate::measure::BenchResult;

/// Whether the run asks for OpenTelemetry.
fn asked() -> bool {
    std::env::var("JOBS_BENCH_OTEL").is_ok_and(|v| v == "1")
}

#[cfg(feature = "otel")]
mod on {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    /// An exporter that drops every span (what the spans cost up to the network).
    #[derive(Debug)]
    struct Discard;

    impl SpanExporter for Discard {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            std::hint::black_box(batch);
            Ok(())
        }
    }

    /// Installs the layer; the provider it returns flushes and stops when dropped.
    pub(super) fn install() -> SdkTracerProvider {
        let provider = SdkTracerProvider::builder().with_batch_exporter(Discard).build();
        tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("info"))
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")))
            .init();
        provider
    }
}

/// Installs OpenTelemetry when the run asks for it; fails when it does and the binary was
/// built without the `otel` feature.
#[cfg(feature = "otel")]
pub(crate) fn install() -> BenchResult<Option<opentelemetry_sdk::trace::SdkTracerProvider>> {
    Ok(asked().then(on::install))
}

/// Installs OpenTelemetry when the run asks for it; fails when it does and the binary was
/// built without the `otel` feature.
#[cfg(not(feature = "otel"))]
pub(crate) fn install() -> BenchResult<Option<()>> {
    match asked() {
        true => Err("JOBS_BENCH_OTEL=1 needs a bench built with `--features otel`".into()),
        false => Ok(None),
    }
}
